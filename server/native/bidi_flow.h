// BidiFlow: RunBidi's flow control as an explicit state machine, with no gRPC
// types, so every transition is unit-tested (tests/server/native/bidi_flow_test.cc).
// The reactor (server/native/run_bidi_reactor.cc) holds a mutex around every event,
// keeps the answers themselves in a queue that mirrors queued(), and performs
// the returned Steps after releasing the mutex (gRPC may run a reaction inline
// inside StartRead/StartWrite/Finish).
//
// What a stream holds in flight:
//   read      one read outstanding at most (gRPC allows one)
//   pending   requests read and submitted, not yet answered
//   queued    answers ready, waiting for the write
//   writing   one write in flight at most (gRPC allows one)
// Requests in flight (pending + queued + writing) are bounded by the window:
// at the window reading pauses until the client takes answers (backpressure
// instead of an unbounded queue). Answers go out in the order they are ready.
//
// States (derived from the fields above, see state()):
//   kReading   a read is outstanding
//   kPaused    no read outstanding, reading not over: the window is full
//   kDraining  the client half-closed, went away, or sent bytes that do not
//              parse: no more reads; answers still pending, queued or writing
//   kBroken    a write failed (the client stopped receiving): every answer
//              still to come is dropped; waits for the outstanding read (if
//              any) and the pending requests before finishing
//   kFinished  Finish was returned, exactly once; every event after it
//              returns no steps
//
// Events (each with its precondition) and their effect:
//   E1 Start()              once, first          -
//   E2 RequestRead()        a read outstanding   pending += 1; the read stays
//                                                 outstanding (no steps), so no
//                                                 other thread can start the
//                                                 next read or finish while the
//                                                 reaction runs
//   E3 ReadDone(true)       a read outstanding   the read is over (after E2 and
//                                                 the request's submission)
//   E4 ReadDone(false)      a read outstanding   the read is over; reading is
//                                                 over (half-close, client gone,
//                                                 cancelled, deadline)
//   E5 BadMessage(status)   a read outstanding   as E4, and the stream finishes
//                                                 with `status` (not OK)
//   E6 AnswerReady(true)    pending > 0          pending -= 1; the answer is
//                                                 queued (enqueue_answer) unless
//                                                 broken (then dropped)
//   E7 AnswerReady(false)   pending > 0          pending -= 1; nothing queued
//                                                 (the answer did not serialize)
//   E8 WriteDone(true)      writing              writing over
//   E9 WriteDone(false)     writing              writing over; broken; queued
//                                                 answers dropped (drop_queued)
// Cancellation is no event of its own: gRPC fails the outstanding read (E4)
// and every later write (E9), and the tasks see it through their stop check.
//
// After every event but E2, the next steps are decided by these rules, in
// order (N0 ends the decision):
//   N0 finished                                         -> no steps
//   N1 !writing && !broken && queued > 0                -> start_write:
//        writing, queued -= 1 (the queue's front goes out)
//   N2 !reading_over && no read outstanding && !broken
//        && pending + queued + writing < window         -> start_read:
//        a read outstanding
//   N3 (reading_over || (broken && no read outstanding))
//        && pending == 0 && !writing && queued == 0     -> finish, finished:
//        kBadMessage with its status if E5 happened, else kWriteFailed if
//        broken, else kOk
// N3 never comes with N1 or N2 (they need, respectively, writing and reading
// not over and not broken), so a finish is the last step the reactor takes.
//
// Transition table (state before -> event -> state after, steps):
//   T1  (new)      E1                         -> kReading, start_read
//   T2  kReading   E2                         -> kReading, none
//   T3  kReading   E3, in flight < window     -> kReading, start_read
//   T4  kReading   E3, in flight == window    -> kPaused, none
//   T5  kReading   E4, something in flight    -> kDraining, none
//   T6  kReading   E4, nothing in flight      -> kFinished, finish kOk
//   T7  kReading   E5, nothing in flight      -> kFinished, finish kBadMessage
//   T8  kReading   E5, something in flight    -> kDraining (finishes kBadMessage
//                                                 once drained, T16)
//   T9  any live   E6, not writing            -> start_write of the answer
//   T10 any live   E6, writing                -> queued behind the write
//   T11 kPaused    E7                         -> kReading, start_read (E6
//                                                 frees no room: the answer
//                                                 stays in flight until written)
//   T12 kPaused    E8 freeing the window      -> kReading, start_read (and
//                                                 start_write if more queued)
//   T13 any live   E8, answers queued         -> start_write of the next
//   T14 any live   E7, not broken             -> no answer queued; as E6 else
//   T15 any live   E9                         -> kBroken, drop_queued
//   T16 kDraining  E6/E7/E8 leaving nothing in flight
//                                             -> kFinished, finish (N3)
//   T17 kBroken    E6                         -> answer dropped (no
//                                                 enqueue_answer)
//   T18 kBroken    E3/E4/E5 or last E6/E7, nothing pending
//                                             -> kFinished, finish kWriteFailed
//                                                 (kBadMessage after E5)
//   T19 kBroken    E3 with pending left       -> kBroken, no read started
//   T20 kFinished  any                        -> kFinished, none
#ifndef TENSOROP_SERVER_NATIVE_BIDI_FLOW_H_
#define TENSOROP_SERVER_NATIVE_BIDI_FLOW_H_

#include "absl/status/status.h"

namespace tensorop::server {

class BidiFlow {
 public:
  // Requests kept in flight per stream (RunBidi's window).
  static constexpr int kDefaultWindow = 64;

  enum class State { kReading, kPaused, kDraining, kBroken, kFinished };

  enum class FinishKind {
    kNone,
    kOk,          // every request answered and written
    kBadMessage,  // a message did not parse: finish with end_status
    kWriteFailed  // a write failed: the reactor says why (idle, cancelled, ...)
  };

  // What the reactor does next, in this order, after releasing its mutex (the
  // queue edits under it).
  struct Steps {
    bool enqueue_answer = false;  // E6: put the answer at the queue's back
    bool drop_queued = false;     // E9: drop every queued answer
    bool start_write = false;     // write the queue's front (popped)
    bool start_read = false;      // start the next read
    FinishKind finish = FinishKind::kNone;
    absl::Status end_status;  // kBadMessage: the status to finish with

    bool finishes() const { return finish != FinishKind::kNone; }
  };

  explicit BidiFlow(int window = kDefaultWindow) : window_(window) {}

  Steps Start();
  void RequestRead();
  Steps ReadDone(bool ok);
  Steps BadMessage(const absl::Status& status);
  Steps AnswerReady(bool serialized);
  Steps WriteDone(bool ok);

  // Before Start: kPaused.
  State state() const;
  int pending() const { return pending_; }
  int queued() const { return queued_; }
  bool writing() const { return writing_; }
  bool read_outstanding() const { return read_outstanding_; }
  int window() const { return window_; }

 private:
  // N0-N3 above.
  Steps Next(Steps steps);

  const int window_;
  bool read_outstanding_ = false;
  bool reads_done_ = false;
  int pending_ = 0;
  int queued_ = 0;
  bool writing_ = false;
  bool broken_ = false;
  bool finished_ = false;
  absl::Status end_status_;
};

}  // namespace tensorop::server

#endif  // TENSOROP_SERVER_NATIVE_BIDI_FLOW_H_
