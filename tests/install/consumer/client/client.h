// The consumer's own client/client.h (issue 46: a project with a client/
// folder of its own). Its folder is first on the consumer's include path, so a
// tensorop header that included "client/..." would find this file, or nothing,
// instead of its own: the build would fail. tensorop's are
// <tensorop/client/...>.
#ifndef CONSUMER_CLIENT_CLIENT_H_
#define CONSUMER_CLIENT_CLIENT_H_

namespace consumer {

// What the consumer prints its result with.
inline const char* Tag() { return "consumer"; }

}  // namespace consumer

#endif  // CONSUMER_CLIENT_CLIENT_H_
