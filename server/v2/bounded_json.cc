#include "server/v2/bounded_json.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "server/wire/quoted.h"

namespace tensorop::server {
namespace {

using Json = nlohmann::json;

// The heap bytes a parsed nlohmann value takes, in glibc's x86-64 chunks: an
// array's or object's own container, its slot in the parent array (16 bytes
// in a vector that may be twice the size it holds) or its member node in the
// parent object's map (node, key string, value), a string's heap object.
// mallinfo2 after parsing flat numbers, [] and {} lists, strings, [[[0]]]
// nests and objects gave 10.5 to 31.6 heap bytes a byte of text; this model
// is 0 to 15% above each (NestedJsonBodiesStayWithinTheBudget checks RSS).
constexpr int64_t kArrayBytes = 32;
constexpr int64_t kObjectBytes = 64;
constexpr int64_t kElementBytes = 32;
constexpr int64_t kMemberBytes = 96;
constexpr int64_t kStringBytes = 48;
// Past 15 characters a std::string's text is a heap block of its own.
int64_t TextBytes(size_t length) {
  return length > 15 ? static_cast<int64_t>((length + 1 + 8 + 15) / 16 * 16) : 0;
}
constexpr absl::string_view kTooDeep = " nests arrays and objects more than ";
// How much is reserved at a time as the values grow.
constexpr int64_t kReserveStep = int64_t{1} << 20;

// nlohmann's DOM parse (as json_sax_dom_parser) with two bounds a hostile
// body meets before it can hurt: arrays and objects nested at most
// kMaxJsonDepth deep, and every value's heap bytes reserved (`reserve`, in
// kReserveStep steps) before they pile up.
class BoundedJsonBuilder final : public nlohmann::json_sax<Json> {
 public:
  BoundedJsonBuilder(absl::string_view what, const JsonReserve& reserve)
      : what_(what), reserve_(reserve) {}

  bool null() override { return Value(Json(nullptr), 0); }
  bool boolean(bool v) override { return Value(Json(v), 0); }
  bool number_integer(number_integer_t v) override { return Value(Json(v), 0); }
  bool number_unsigned(number_unsigned_t v) override { return Value(Json(v), 0); }
  bool number_float(number_float_t v, const string_t&) override { return Value(Json(v), 0); }
  bool string(string_t& v) override {
    const int64_t bytes = kStringBytes + TextBytes(v.size());
    return Value(Json(std::move(v)), bytes);
  }
  bool binary(binary_t&) override {
    return Fail(absl::InvalidArgumentError(absl::StrCat(what_, " has a binary value")));
  }
  bool start_object(std::size_t) override { return Open(Json::object(), kObjectBytes); }
  bool key(string_t& key) override {
    if (!Charge(kMemberBytes + TextBytes(key.size()))) return false;
    member_ = &(*open_.back())[std::move(key)];
    return true;
  }
  bool end_object() override { return Close(); }
  bool start_array(std::size_t) override { return Open(Json::array(), kArrayBytes); }
  bool end_array() override { return Close(); }
  bool parse_error(std::size_t, const std::string&, const Json::exception& e) override {
    return Fail(absl::InvalidArgumentError(
        absl::StrCat(what_, " is not valid JSON: ", CutForMessage(e.what(), 256))));
  }

  absl::StatusOr<Json> Take() && {
    if (!error_.ok()) return error_;
    return std::move(root_);
  }

 private:
  bool Fail(absl::Status status) {
    if (error_.ok()) error_ = std::move(status);
    return false;
  }
  // Counts `bytes` more, reserving the next step when they pass what is held.
  bool Charge(int64_t bytes) {
    charged_ += bytes;
    while (charged_ > reserved_) {
      if (reserve_) {
        if (absl::Status status = reserve_(kReserveStep); !status.ok()) return Fail(status);
      }
      reserved_ += kReserveStep;
    }
    return true;
  }
  // Places `v` where the parse is: the root, the open array's next element, or
  // the open object's member whose key came last.
  Json* Place(Json v) {
    if (open_.empty()) {
      root_ = std::move(v);
      return &root_;
    }
    Json& parent = *open_.back();
    if (parent.is_array()) {
      parent.push_back(std::move(v));
      return &parent.back();
    }
    *member_ = std::move(v);
    return member_;
  }
  bool Value(Json v, int64_t bytes) {
    if (!open_.empty() && open_.back()->is_array()) bytes += kElementBytes;
    if (!Charge(bytes)) return false;
    Place(std::move(v));
    return true;
  }
  bool Open(Json container, int64_t bytes) {
    if (open_.size() >= static_cast<size_t>(kMaxJsonDepth)) {
      return Fail(
          absl::InvalidArgumentError(absl::StrCat(what_, kTooDeep, kMaxJsonDepth, " deep")));
    }
    if (!open_.empty() && open_.back()->is_array()) bytes += kElementBytes;
    if (!Charge(bytes)) return false;
    open_.push_back(Place(std::move(container)));
    return true;
  }
  bool Close() {
    open_.pop_back();
    return true;
  }

  const absl::string_view what_;
  const JsonReserve& reserve_;
  Json root_;
  std::vector<Json*> open_;  // the arrays and objects being filled, outermost first
  Json* member_ = nullptr;
  int64_t charged_ = 0;
  int64_t reserved_ = 0;
  absl::Status error_;
};

// Whether `text` has a bare NaN, Infinity or -Infinity outside its strings:
// then `quoted` is `text` with each one in quotes, for nlohmann to read as a
// string. One pass; the copy is made only when there is one.
bool QuoteNonFiniteLiterals(absl::string_view text, std::string& quoted) {
  static constexpr absl::string_view kLiterals[] = {"NaN", "Infinity", "-Infinity"};
  bool in_string = false;
  size_t copied = 0;  // text before this is in `quoted` (once a literal was found)
  bool found = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;  // the escaped character, whatever it is
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
      continue;
    }
    if (c != 'N' && c != 'I' && c != '-') continue;
    for (absl::string_view literal : kLiterals) {
      if (!absl::StartsWith(text.substr(i), literal)) continue;
      const size_t end = i + literal.size();
      if (end < text.size() && absl::ascii_isalnum(static_cast<unsigned char>(text[end]))) break;
      if (!found) quoted.reserve(text.size() + 64);
      found = true;
      absl::StrAppend(&quoted, text.substr(copied, i - copied), "\"", literal, "\"");
      copied = end;
      i = end - 1;
      break;
    }
  }
  if (found) absl::StrAppend(&quoted, text.substr(copied));
  return found;
}

}  // namespace

std::string DumpJson(const Json& json) {
  return json.dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::string QuoteJson(const Json& v) {
  constexpr size_t kMaxQuoted = 64;
  if (v.is_array()) return absl::StrCat("an array of ", v.size(), " items");
  if (v.is_object()) return absl::StrCat("an object of ", v.size(), " members");
  if (v.is_string() && v.get_ref<const std::string&>().size() > kMaxQuoted) {
    return DumpJson(Json(v.get_ref<const std::string&>().substr(0, kMaxQuoted))) + "...";
  }
  return DumpJson(v);
}

absl::StatusOr<Json> ParseBoundedJson(absl::string_view text, absl::string_view what,
                                      const JsonReserve& reserve) {
  std::string quoted;
  if (QuoteNonFiniteLiterals(text, quoted)) {
    if (reserve) RETURN_IF_ERROR(reserve(static_cast<int64_t>(quoted.size())));
    text = quoted;
  }
  BoundedJsonBuilder builder(what, reserve);
  Json::sax_parse(text.begin(), text.end(), &builder);
  return std::move(builder).Take();
}

bool NestsTooDeep(const absl::Status& status) {
  return absl::StrContains(status.message(), kTooDeep);
}

}  // namespace tensorop::server
