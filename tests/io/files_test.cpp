// Outputs made as they are written (io::Output::produce): the same bytes as a whole string, on
// a regular file and on a device; a producer that throws or a write that fails leaves the
// existing file untouched and no temporary file behind.

#include "pipeplan/io/files.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "../support/temp_folder.hpp"
#include "pipeplan/error.hpp"

namespace pipeplan::io {
namespace {

namespace fs = std::filesystem;

class ProducedOutputTest : public pipeplan::testing::TempFolderTest {};

std::vector<fs::path> entries(const fs::path& folder) {
  std::vector<fs::path> found;
  for (const auto& entry : fs::directory_iterator(folder)) found.push_back(entry.path());
  return found;
}

// `pieces` pieces of `size` bytes each, every byte telling its piece and position apart; the
// producer hands each in a string of its own or (reuse) in the one the sink handed back.
TextProducer pieces_of(int pieces, std::size_t size, bool reuse, std::string* whole) {
  whole->clear();
  for (int p = 0; p < pieces; ++p) {
    for (std::size_t i = 0; i < size; ++i) whole->push_back(static_cast<char>('a' + (p + i) % 26));
  }
  return [pieces, size, reuse, whole](const TextSink& sink) {
    std::string piece;
    for (int p = 0; p < pieces; ++p) {
      if (!reuse) piece = std::string();
      piece.assign(*whole, static_cast<std::size_t>(p) * size, size);
      sink(piece);
      if (!piece.empty()) throw std::logic_error("the sink left the piece unemptied");
    }
  };
}

TEST_F(ProducedOutputTest, WritesTheSameBytesAsTheWholeText) {
  for (const bool reuse : {false, true}) {
    for (const auto& [pieces, size] : std::vector<std::pair<int, std::size_t>>{
             {0, 1}, {1, 1}, {1, 5000}, {7, 1 << 20}, {40, 4099}}) {
      std::string whole;
      const fs::path path = folder_ / "out.json";
      write_files_atomically({Output{path.string(), {}, pieces_of(pieces, size, reuse, &whole)}});
      EXPECT_EQ(read(path), whole) << pieces << " pieces of " << size;
      EXPECT_EQ(entries(folder_).size(), 1U);  // no temporary file left
    }
  }
}

TEST_F(ProducedOutputTest, WritesADeviceInPlace) {
  std::string whole;
  EXPECT_NO_THROW(
      write_files_atomically({Output{"/dev/null", {}, pieces_of(3, 100, true, &whole)}}));
}

TEST_F(ProducedOutputTest, AProducerThatThrowsLeavesTheFileUntouched) {
  const fs::path path = folder_ / "out.json";
  std::ofstream(path) << "before";
  int handed = 0;
  const TextProducer failing = [&](const TextSink& sink) {
    for (; handed < 5; ++handed) {
      std::string piece(1 << 20, 'x');
      sink(piece);
    }
    throw InternalError("made no more");
  };
  try {
    write_files_atomically({Output{path.string(), {}, failing}});
    ADD_FAILURE() << "no error";
  } catch (const InternalError& error) {
    EXPECT_STREQ(error.what(), "internal error: made no more");
  }
  EXPECT_EQ(handed, 5);
  EXPECT_EQ(read(path), "before");
  EXPECT_EQ(entries(folder_).size(), 1U);
}

TEST_F(ProducedOutputTest, AWriteThatFailsIsAnOutputErrorAndTheRestIsNotWritten) {
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  std::string whole;
  int made = 0;
  const TextProducer counting = [&](const TextSink& sink) {
    pieces_of(6, 1 << 16, true, &whole)([&](std::string& piece) {
      ++made;
      sink(piece);
    });
  };
  try {
    write_files_atomically({Output{"/dev/full", {}, counting}});
    ADD_FAILURE() << "no error";
  } catch (const OutputError& error) {
    EXPECT_STREQ(error.what(), "/dev/full: cannot write: No space left on device");
  }
  EXPECT_EQ(made, 6);  // the producer runs to its end; what follows a failure is dropped
}

// Several outputs, one produced: all are written, and a produced one beside a failing one
// leaves nothing behind.
TEST_F(ProducedOutputTest, AProducedOutputIsAllOrNothingWithTheOthers) {
  std::string whole;
  const fs::path plan = folder_ / "plan.json", trace = folder_ / "trace.json";
  write_files_atomically({Output{plan.string(), {}, pieces_of(3, 1000, false, &whole)},
                          Output{trace.string(), "trace", {}}});
  EXPECT_EQ(read(plan), whole);
  EXPECT_EQ(read(trace), "trace");
  std::ofstream(plan) << "before";
  EXPECT_THROW(write_files_atomically({Output{plan.string(), {}, pieces_of(3, 1000, true, &whole)},
                                       Output{(folder_ / "missing" / "x").string(), "x", {}}}),
               OutputError);
  EXPECT_EQ(read(plan), "before");
  EXPECT_EQ(entries(folder_).size(), 2U);
}

}  // namespace
}  // namespace pipeplan::io
