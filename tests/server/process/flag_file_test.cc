#include "server/process/flag_file.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/status_matchers.h"

namespace tensorop::server {
namespace {

using ::tensorop::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::Field;

TEST(FlagFileTest, KeepsFlagLinesStrippedWithTheirOrigin) {
  ASSERT_OK_AND_ASSIGN(
      std::vector<Argument> arguments,
      ParseFlagFile("# tensord flags\n\n  --address=:0 \r\n\t#--echo\n--worker_threads=2",
                    "/etc/tensord/flags"));
  EXPECT_THAT(arguments, ElementsAre(AllOf(Field(&Argument::text, "--address=:0"),
                                           Field(&Argument::origin, "/etc/tensord/flags:3: ")),
                                     AllOf(Field(&Argument::text, "--worker_threads=2"),
                                           Field(&Argument::origin, "/etc/tensord/flags:5: "))));
}

TEST(FlagFileTest, EmptyTextHasNoArguments) {
  ASSERT_OK_AND_ASSIGN(std::vector<Argument> arguments, ParseFlagFile("", "f"));
  EXPECT_TRUE(arguments.empty());
  ASSERT_OK_AND_ASSIGN(arguments, ParseFlagFile("\n\n", "f"));
  EXPECT_TRUE(arguments.empty());
}

TEST(FlagFileTest, RefusesALineThatIsNotOneFlag) {
  EXPECT_THAT(ParseFlagFile("--echo\nworker_threads=2\n", "flags.txt"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "flags.txt:2: expected one --name=value per line (no --flagfile), "
                       "not \"worker_threads=2\""));
}

TEST(FlagFileTest, RefusesANestedFlagFile) {
  EXPECT_THAT(ParseFlagFile("--flagfile=/other\n", "flags.txt"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "flags.txt:1: expected one --name=value per line (no --flagfile), "
                       "not \"--flagfile=/other\""));
}

}  // namespace
}  // namespace tensorop::server
