// RunBidi's flow control (server/native/bidi_flow.h): one test per row of the header's
// transition table (T1-T20), a few sequences, and an exhaustive walk over every
// legal order of events for small streams.
#include "server/native/bidi_flow.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tensorop::server {
namespace {

using State = BidiFlow::State;
using Steps = BidiFlow::Steps;

// The steps as words, in the order the reactor performs them.
std::string Describe(const Steps& steps) {
  std::vector<std::string> words;
  if (steps.enqueue_answer) words.push_back("enqueue");
  if (steps.drop_queued) words.push_back("drop");
  if (steps.start_write) words.push_back("write");
  if (steps.start_read) words.push_back("read");
  switch (steps.finish) {
    case BidiFlow::FinishKind::kNone:
      break;
    case BidiFlow::FinishKind::kOk:
      words.push_back("finish:ok");
      break;
    case BidiFlow::FinishKind::kBadMessage:
      words.push_back(absl::StrCat("finish:bad_message(", steps.end_status.ToString(), ")"));
      break;
    case BidiFlow::FinishKind::kWriteFailed:
      words.push_back("finish:write_failed");
      break;
  }
  return words.empty() ? "none" : absl::StrJoin(words, " ");
}

// A message read and submitted (E2 then E3), as the reactor does.
std::string Message(BidiFlow& flow) {
  flow.RequestRead();
  return Describe(flow.ReadDone(true));
}

const absl::Status kBad = absl::InvalidArgumentError("message 2 is not valid");
constexpr char kBadFinish[] = "finish:bad_message(INVALID_ARGUMENT: message 2 is not valid)";

TEST(BidiFlowTest, T1StartReads) {
  BidiFlow flow;
  EXPECT_EQ(flow.window(), 64);
  EXPECT_EQ(flow.state(), State::kPaused);
  EXPECT_EQ(Describe(flow.Start()), "read");
  EXPECT_EQ(flow.state(), State::kReading);
  EXPECT_TRUE(flow.read_outstanding());
}

TEST(BidiFlowTest, T2RequestReadKeepsTheReadOutstanding) {
  BidiFlow flow;
  flow.Start();
  flow.RequestRead();
  EXPECT_EQ(flow.pending(), 1);
  EXPECT_TRUE(flow.read_outstanding());
  EXPECT_EQ(flow.state(), State::kReading);
}

TEST(BidiFlowTest, T3ReadDoneUnderTheWindowReadsAgain) {
  BidiFlow flow;
  flow.Start();
  EXPECT_EQ(Message(flow), "read");
  EXPECT_EQ(flow.pending(), 1);
  EXPECT_EQ(flow.state(), State::kReading);
}

TEST(BidiFlowTest, T4ReadDoneAtTheWindowPauses) {
  BidiFlow flow(2);
  flow.Start();
  EXPECT_EQ(Message(flow), "read");
  EXPECT_EQ(Message(flow), "none");
  EXPECT_EQ(flow.state(), State::kPaused);
  EXPECT_FALSE(flow.read_outstanding());
  EXPECT_EQ(flow.pending(), 2);
}

TEST(BidiFlowTest, T4DefaultWindowPausesAfter64Requests) {
  BidiFlow flow;
  flow.Start();
  for (int i = 1; i < 64; ++i) ASSERT_EQ(Message(flow), "read") << "request " << i;
  EXPECT_EQ(Message(flow), "none");
  EXPECT_EQ(flow.state(), State::kPaused);
  EXPECT_EQ(flow.pending(), 64);
}

TEST(BidiFlowTest, T5HalfCloseWithRequestsInFlightDrains) {
  BidiFlow flow;
  flow.Start();
  Message(flow);
  EXPECT_EQ(Describe(flow.ReadDone(false)), "none");
  EXPECT_EQ(flow.state(), State::kDraining);
  EXPECT_EQ(flow.pending(), 1);
}

TEST(BidiFlowTest, T6HalfCloseWithNothingInFlightFinishesOk) {
  BidiFlow flow;
  flow.Start();
  EXPECT_EQ(Describe(flow.ReadDone(false)), "finish:ok");
  EXPECT_EQ(flow.state(), State::kFinished);
}

TEST(BidiFlowTest, T7BadMessageWithNothingInFlightFinishesWithItsStatus) {
  BidiFlow flow;
  flow.Start();
  const Steps steps = flow.BadMessage(kBad);
  EXPECT_EQ(Describe(steps), kBadFinish);
  EXPECT_EQ(steps.end_status, kBad);
  EXPECT_EQ(flow.state(), State::kFinished);
}

TEST(BidiFlowTest, T8BadMessageWithRequestsInFlightAnswersThemFirst) {
  BidiFlow flow;
  flow.Start();
  Message(flow);
  EXPECT_EQ(Describe(flow.BadMessage(kBad)), "none");
  EXPECT_EQ(flow.state(), State::kDraining);
  EXPECT_EQ(Describe(flow.AnswerReady(true)), "enqueue write");
  EXPECT_EQ(Describe(flow.WriteDone(true)), kBadFinish);
}

TEST(BidiFlowTest, T9AnswerWithNoWriteInFlightIsWritten) {
  BidiFlow flow;
  flow.Start();
  Message(flow);
  EXPECT_EQ(Describe(flow.AnswerReady(true)), "enqueue write");
  EXPECT_TRUE(flow.writing());
  EXPECT_EQ(flow.queued(), 0);
  EXPECT_EQ(flow.pending(), 0);
}

TEST(BidiFlowTest, T10AnswerWhileWritingQueuesBehindTheWrite) {
  BidiFlow flow;
  flow.Start();
  Message(flow);
  Message(flow);
  EXPECT_EQ(Describe(flow.AnswerReady(true)), "enqueue write");
  EXPECT_EQ(Describe(flow.AnswerReady(true)), "enqueue");
  EXPECT_EQ(flow.queued(), 1);
  EXPECT_TRUE(flow.writing());
}

TEST(BidiFlowTest, T11PausedResumesWhenAnAnswerIsDropped) {
  BidiFlow flow(1);
  flow.Start();
  EXPECT_EQ(Message(flow), "none");
  EXPECT_EQ(flow.state(), State::kPaused);
  EXPECT_EQ(Describe(flow.AnswerReady(false)), "read");
  EXPECT_EQ(flow.state(), State::kReading);
}

TEST(BidiFlowTest, T11AnAnswerReadyFreesNoRoomUntilWritten) {
  BidiFlow flow(1);
  flow.Start();
  Message(flow);
  EXPECT_EQ(Describe(flow.AnswerReady(true)), "enqueue write");
  EXPECT_EQ(flow.state(), State::kPaused);
}

TEST(BidiFlowTest, T12PausedResumesWhenAWriteCompletes) {
  BidiFlow flow(2);
  flow.Start();
  Message(flow);
  Message(flow);
  ASSERT_EQ(flow.state(), State::kPaused);
  EXPECT_EQ(Describe(flow.AnswerReady(true)), "enqueue write");
  EXPECT_EQ(Describe(flow.AnswerReady(true)), "enqueue");
  EXPECT_EQ(Describe(flow.WriteDone(true)), "write read");
  EXPECT_EQ(flow.state(), State::kReading);
}

TEST(BidiFlowTest, T13WriteDoneWritesTheNextQueuedAnswer) {
  BidiFlow flow;
  flow.Start();
  Message(flow);
  Message(flow);
  flow.AnswerReady(true);
  flow.AnswerReady(true);
  EXPECT_EQ(Describe(flow.WriteDone(true)), "write");
  EXPECT_EQ(flow.queued(), 0);
  EXPECT_EQ(Describe(flow.WriteDone(true)), "none");
  EXPECT_FALSE(flow.writing());
  EXPECT_EQ(flow.state(), State::kReading);
}

TEST(BidiFlowTest, T14AnAnswerThatDidNotSerializeIsNotQueued) {
  BidiFlow flow;
  flow.Start();
  Message(flow);
  EXPECT_EQ(Describe(flow.AnswerReady(false)), "none");
  EXPECT_EQ(flow.pending(), 0);
  EXPECT_EQ(flow.queued(), 0);
  EXPECT_FALSE(flow.writing());
}

TEST(BidiFlowTest, T15WriteFailureBreaksAndDropsTheQueue) {
  BidiFlow flow;
  flow.Start();
  Message(flow);
  Message(flow);
  flow.AnswerReady(true);
  flow.AnswerReady(true);
  EXPECT_EQ(Describe(flow.WriteDone(false)), "drop");
  EXPECT_EQ(flow.state(), State::kBroken);
  EXPECT_EQ(flow.queued(), 0);
  EXPECT_FALSE(flow.writing());
}

TEST(BidiFlowTest, T16DrainingFinishesOkOnTheLastWrite) {
  BidiFlow flow;
  flow.Start();
  Message(flow);
  flow.ReadDone(false);
  EXPECT_EQ(Describe(flow.AnswerReady(true)), "enqueue write");
  EXPECT_EQ(Describe(flow.WriteDone(true)), "finish:ok");
  EXPECT_EQ(flow.state(), State::kFinished);
}

TEST(BidiFlowTest, T16DrainingFinishesOkOnTheLastUnserializedAnswer) {
  BidiFlow flow;
  flow.Start();
  Message(flow);
  flow.ReadDone(false);
  EXPECT_EQ(Describe(flow.AnswerReady(false)), "finish:ok");
}

TEST(BidiFlowTest, T17BrokenDropsAnswers) {
  BidiFlow flow;
  flow.Start();
  Message(flow);
  Message(flow);
  flow.AnswerReady(true);
  flow.WriteDone(false);
  EXPECT_EQ(Describe(flow.AnswerReady(true)), "none");
  EXPECT_EQ(flow.queued(), 0);
  EXPECT_EQ(flow.pending(), 0);
  EXPECT_EQ(flow.state(), State::kBroken);  // the read is still outstanding
}

TEST(BidiFlowTest, T18BrokenFinishesWhenTheOutstandingReadEnds) {
  BidiFlow flow;
  flow.Start();
  Message(flow);
  flow.AnswerReady(true);
  EXPECT_EQ(Describe(flow.WriteDone(false)), "drop");
  EXPECT_EQ(Describe(flow.ReadDone(false)), "finish:write_failed");
}

TEST(BidiFlowTest, T18BrokenFinishesWhenTheOutstandingReadBroughtARequestAnswered) {
  BidiFlow flow;
  flow.Start();
  Message(flow);
  flow.AnswerReady(true);
  flow.WriteDone(false);
  flow.RequestRead();  // answered inline (over the budget) while the read is outstanding
  EXPECT_EQ(Describe(flow.AnswerReady(true)), "none");
  EXPECT_EQ(Describe(flow.ReadDone(true)), "finish:write_failed");
}

TEST(BidiFlowTest, T18BrokenFinishesOnTheLastAnswer) {
  BidiFlow flow;
  flow.Start();
  Message(flow);
  Message(flow);
  flow.AnswerReady(true);
  flow.WriteDone(false);
  EXPECT_EQ(Describe(flow.ReadDone(false)), "none");
  EXPECT_EQ(Describe(flow.AnswerReady(true)), "finish:write_failed");
}

TEST(BidiFlowTest, T18ABadMessageOutranksTheWriteFailure) {
  BidiFlow flow;
  flow.Start();
  Message(flow);
  flow.AnswerReady(true);
  flow.WriteDone(false);
  EXPECT_EQ(Describe(flow.BadMessage(kBad)), kBadFinish);
}

TEST(BidiFlowTest, T19BrokenStartsNoRead) {
  BidiFlow flow;
  flow.Start();
  Message(flow);
  flow.RequestRead();
  flow.AnswerReady(true);
  EXPECT_EQ(Describe(flow.WriteDone(false)), "drop");
  EXPECT_EQ(Describe(flow.ReadDone(true)), "none");
  EXPECT_FALSE(flow.read_outstanding());
  EXPECT_EQ(flow.pending(), 1);
  EXPECT_EQ(flow.state(), State::kBroken);
  EXPECT_EQ(Describe(flow.AnswerReady(true)), "finish:write_failed");
}

TEST(BidiFlowTest, T20FinishedIgnoresEveryEvent) {
  BidiFlow flow;
  flow.Start();
  ASSERT_EQ(Describe(flow.ReadDone(false)), "finish:ok");
  EXPECT_EQ(Describe(flow.Start()), "none");
  flow.RequestRead();
  EXPECT_EQ(Describe(flow.ReadDone(true)), "none");
  EXPECT_EQ(Describe(flow.ReadDone(false)), "none");
  EXPECT_EQ(Describe(flow.BadMessage(kBad)), "none");
  EXPECT_EQ(Describe(flow.AnswerReady(true)), "none");
  EXPECT_EQ(Describe(flow.AnswerReady(false)), "none");
  EXPECT_EQ(Describe(flow.WriteDone(true)), "none");
  EXPECT_EQ(Describe(flow.WriteDone(false)), "none");
  EXPECT_EQ(flow.state(), State::kFinished);
  EXPECT_EQ(flow.pending(), 0);
}

// Sequences.

TEST(BidiFlowTest, HalfCloseWithAnswersPendingWritesEveryAnswerThenFinishes) {
  BidiFlow flow;
  EXPECT_EQ(Describe(flow.Start()), "read");
  EXPECT_EQ(Message(flow), "read");
  EXPECT_EQ(Message(flow), "read");
  EXPECT_EQ(Message(flow), "read");
  EXPECT_EQ(Describe(flow.ReadDone(false)), "none");
  EXPECT_EQ(Describe(flow.AnswerReady(true)), "enqueue write");
  EXPECT_EQ(Describe(flow.AnswerReady(false)), "none");  // an error answer that failed
  EXPECT_EQ(Describe(flow.AnswerReady(true)), "enqueue");
  EXPECT_EQ(flow.state(), State::kDraining);
  EXPECT_EQ(Describe(flow.WriteDone(true)), "write");
  EXPECT_EQ(Describe(flow.WriteDone(true)), "finish:ok");
}

TEST(BidiFlowTest, WriteFailureMidStreamDropsTheRestAndFinishesOnce) {
  BidiFlow flow;
  flow.Start();
  Message(flow);
  Message(flow);
  Message(flow);
  EXPECT_EQ(Describe(flow.AnswerReady(true)), "enqueue write");
  EXPECT_EQ(Describe(flow.AnswerReady(true)), "enqueue");
  EXPECT_EQ(Describe(flow.WriteDone(true)), "write");
  EXPECT_EQ(Describe(flow.WriteDone(false)), "drop");
  EXPECT_EQ(Describe(flow.AnswerReady(true)), "none");  // the third, dropped
  EXPECT_EQ(Describe(flow.ReadDone(false)), "finish:write_failed");
  EXPECT_EQ(Describe(flow.WriteDone(false)), "none");
}

TEST(BidiFlowTest, CancelWhileATaskRunsFinishesAfterItsAnswer) {
  BidiFlow flow;
  flow.Start();
  Message(flow);
  // gRPC fails the outstanding read; the task still answers (CANCELLED).
  EXPECT_EQ(Describe(flow.ReadDone(false)), "none");
  EXPECT_EQ(flow.state(), State::kDraining);
  EXPECT_EQ(Describe(flow.AnswerReady(true)), "enqueue write");
  EXPECT_EQ(Describe(flow.WriteDone(false)), "drop finish:write_failed");
}

TEST(BidiFlowTest, ErrorAnswersKeepTheStreamGoing) {
  BidiFlow flow;
  flow.Start();
  Message(flow);
  EXPECT_EQ(Describe(flow.AnswerReady(true)), "enqueue write");  // an error answer
  EXPECT_EQ(Describe(flow.WriteDone(true)), "none");
  EXPECT_EQ(flow.state(), State::kReading);
  EXPECT_EQ(Message(flow), "read");
}

// Every legal order of events for streams of up to kRequests requests over a
// window of 2: one read and one write in flight at most, the window held,
// the steps' queue edits consistent, and exactly one finish, only once
// nothing is in flight, never followed by another step.
class Walk {
 public:
  static constexpr int kRequests = 3;

  void Run() {
    BidiFlow flow(2);
    const Steps steps = flow.Start();
    Visit(flow, Model{}, /*finished=*/false, {steps});
  }
  int ends() const { return ends_; }

 private:
  struct Model {
    bool read = false;   // a read outstanding, from the steps
    bool write = false;  // a write in flight, from the steps
    int queued = 0;
    int pending = 0;
    int read_messages = 0;
  };

  // Applies `steps` to `model`; false (with a test failure) when they break a rule.
  static bool Apply(const Steps& steps, Model& model, bool& finished) {
    if (finished) {
      EXPECT_EQ(Describe(steps), "none") << "a step after the finish";
      return Describe(steps) == "none";
    }
    if (steps.enqueue_answer) ++model.queued;
    if (steps.drop_queued) model.queued = 0;
    if (steps.start_write) {
      EXPECT_FALSE(model.write) << "two writes in flight";
      EXPECT_GT(model.queued, 0) << "a write with nothing queued";
      --model.queued;
      model.write = true;
    }
    if (steps.start_read) {
      EXPECT_FALSE(model.read) << "two reads outstanding";
      model.read = true;
    }
    if (steps.finishes()) {
      EXPECT_FALSE(steps.start_read || steps.start_write) << "a finish with more to do";
      EXPECT_FALSE(model.read || model.write) << "a finish with a read or write in flight";
      EXPECT_EQ(model.pending, 0) << "a finish with requests unanswered";
      EXPECT_EQ(model.queued, 0) << "a finish with answers queued";
      finished = true;
    }
    return !::testing::Test::HasFailure();
  }

  // `steps`: what the last event (or events, in order) returned.
  // `flow` is a copy: each caller takes the event's steps first, then passes the
  // flow they left (an argument's copy and a call on it are unsequenced).
  void Visit(BidiFlow flow, Model model, bool finished, const std::vector<Steps>& steps) {
    for (const Steps& each : steps) {
      if (!Apply(each, model, finished)) return;
    }
    EXPECT_LE(model.pending + model.queued + (model.write ? 1 : 0), flow.window());
    EXPECT_EQ(flow.queued(), model.queued);
    if (::testing::Test::HasFailure()) return;
    bool any = false;
    if (model.read) {
      any = true;
      if (model.read_messages < kRequests) {
        BidiFlow next = flow;
        Model m = model;
        m.read = false;
        ++m.pending;
        ++m.read_messages;
        next.RequestRead();
        const Steps read = next.ReadDone(true);
        Visit(next, m, finished, {read});
        // Answered inline (over the budget) before the reaction is done.
        for (bool serialized : {true, false}) {
          BidiFlow inline_flow = flow;
          Model inline_model = model;
          inline_model.read = false;
          ++inline_model.read_messages;
          inline_flow.RequestRead();
          const Steps answered = inline_flow.AnswerReady(serialized);
          // The read is still outstanding: no read starts and no finish.
          EXPECT_FALSE(answered.start_read || answered.finishes());
          const Steps read = inline_flow.ReadDone(true);
          Visit(inline_flow, inline_model, finished, {answered, read});
        }
      }
      for (int end = 0; end < 2; ++end) {
        BidiFlow next = flow;
        Model m = model;
        m.read = false;
        m.read_messages = kRequests;  // no more reads once they ended
        const Steps ended =
            end == 0 ? next.ReadDone(false) : next.BadMessage(absl::InvalidArgumentError("x"));
        Visit(next, m, finished, {ended});
      }
    }
    if (model.pending > 0) {
      any = true;
      for (bool serialized : {true, false}) {
        BidiFlow next = flow;
        Model m = model;
        --m.pending;
        const Steps answered = next.AnswerReady(serialized);
        Visit(next, m, finished, {answered});
      }
    }
    if (model.write) {
      any = true;
      for (bool ok : {true, false}) {
        BidiFlow next = flow;
        Model m = model;
        m.write = false;
        const Steps written = next.WriteDone(ok);
        Visit(next, m, finished, {written});
      }
    }
    if (!any) {
      ++ends_;
      EXPECT_TRUE(finished) << "nothing in flight and no finish: the stream would hang";
      EXPECT_EQ(flow.state(), State::kFinished);
    }
  }

  int ends_ = 0;
};

TEST(BidiFlowTest, EveryOrderOfEventsFinishesExactlyOnce) {
  Walk walk;
  walk.Run();
  EXPECT_GT(walk.ends(), 1000);
}

}  // namespace
}  // namespace tensorop::server
