#include "kube/line_splitter.h"

#include <gtest/gtest.h>

#include <random>

#include "kube/status.h"

namespace kube {
namespace {

std::vector<std::string> Events(int n) {
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i) {
    Json o = {{"type", "MODIFIED"},
              {"object",
               {{"metadata",
                 {{"name", "p" + std::to_string(i)}, {"resourceVersion", std::to_string(100 + i)}}},
                {"data", std::string(static_cast<size_t>(i * 37 % 300), 'x')}}}};
    out.push_back(o.dump());
  }
  return out;
}

std::vector<std::string> Split(const std::string& stream, const std::vector<size_t>& cuts) {
  LineSplitter s;
  std::vector<std::string> lines;
  size_t pos = 0;
  for (size_t c : cuts) {
    EXPECT_TRUE(s.Feed(std::string_view(stream).substr(pos, c - pos), [&](std::string_view l) {
      lines.emplace_back(l);
      return true;
    }));
    pos = c;
  }
  EXPECT_TRUE(s.Feed(std::string_view(stream).substr(pos), [&](std::string_view l) {
    lines.emplace_back(l);
    return true;
  }));
  EXPECT_EQ(s.buffered(), 0u);
  return lines;
}

TEST(LineSplitterTest, EveryChunkingYieldsTheSameEvents) {
  auto events = Events(40);
  std::string stream;
  for (const auto& e : events) stream += e + "\n";
  // One byte at a time.
  std::vector<size_t> cuts;
  for (size_t i = 1; i < stream.size(); ++i) cuts.push_back(i);
  EXPECT_EQ(Split(stream, cuts), events);
  // Everything at once (many events in one chunk).
  EXPECT_EQ(Split(stream, {}), events);
  // Cuts exactly before and after every newline.
  cuts.clear();
  for (size_t i = 0; i < stream.size(); ++i)
    if (stream[i] == '\n') {
      cuts.push_back(i);
      cuts.push_back(i + 1);
    }
  cuts.pop_back();
  EXPECT_EQ(Split(stream, cuts), events);
  // Random chunkings, fixed seeds (deterministic).
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    std::mt19937_64 rng(seed);
    cuts.clear();
    size_t pos = 0;
    while (true) {
      pos += 1 + rng() % (seed % 2 ? 7 : 900);
      if (pos >= stream.size()) break;
      cuts.push_back(pos);
    }
    ASSERT_EQ(Split(stream, cuts), events) << "seed " << seed;
  }
}

TEST(LineSplitterTest, CrLfAndBlankLinesAndPartialTail) {
  LineSplitter s;
  std::vector<std::string> lines;
  auto cb = [&](std::string_view l) {
    lines.emplace_back(l);
    return true;
  };
  EXPECT_TRUE(s.Feed("a\r\n\n\nb", cb));
  EXPECT_EQ(lines, (std::vector<std::string>{"a"}));
  EXPECT_EQ(s.buffered(), 1u);
  EXPECT_TRUE(s.Feed("c\n", cb));
  EXPECT_EQ(lines, (std::vector<std::string>{"a", "bc"}));
}

TEST(LineSplitterTest, StopsOnRequestAndOnOversizedLine) {
  LineSplitter s;
  int n = 0;
  EXPECT_FALSE(s.Feed("1\n2\n3\n", [&](std::string_view) { return ++n < 2; }));
  EXPECT_EQ(n, 2);
  LineSplitter small(8);
  EXPECT_TRUE(small.Feed("1234", [](std::string_view) { return true; }));
  EXPECT_FALSE(small.Feed("56789", [](std::string_view) { return true; }));
}

}  // namespace
}  // namespace kube
