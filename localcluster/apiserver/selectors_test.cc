#include "localcluster/apiserver/selectors.h"

#include <gtest/gtest.h>

namespace kubelocal {
namespace {

json Obj(json labels) { return {{"metadata", {{"name", "x"}, {"labels", labels}}}}; }

bool Match(const std::string& sel, const json& o) {
  auto s = LabelSelector::Parse(sel);
  EXPECT_TRUE(s.ok()) << sel;
  return s.ok() && s->Matches(o);
}

TEST(LabelSelector, AllOperators) {
  json o = Obj({{"app", "web"}, {"tier", "front"}});
  EXPECT_TRUE(Match("", o));
  EXPECT_TRUE(Match("app=web", o));
  EXPECT_TRUE(Match("app==web", o));
  EXPECT_FALSE(Match("app=db", o));
  EXPECT_TRUE(Match("app!=db", o));
  EXPECT_TRUE(Match("missing!=x", o));  // != matches absent labels
  EXPECT_TRUE(Match("app in (db, web)", o));
  EXPECT_FALSE(Match("app notin (web)", o));
  EXPECT_TRUE(Match("missing notin (web)", o));
  EXPECT_TRUE(Match("tier", o));
  EXPECT_FALSE(Match("!tier", o));
  EXPECT_TRUE(Match("!missing", o));
  EXPECT_TRUE(Match("app=web,tier in (front,back),!missing", o));
  EXPECT_FALSE(Match("app=web,tier=back", o));
  EXPECT_FALSE(Match("app=web", json::object()));  // no metadata at all
}

TEST(LabelSelector, RejectsGarbage) {
  for (const char* bad : {"app in (a", "app in ()", "app=we b", "app ~ x", "=x", "app in (a),"}) {
    auto s = LabelSelector::Parse(bad);
    EXPECT_FALSE(s.ok()) << bad;
    if (!s.ok()) {
      EXPECT_EQ(HttpCode(s.status()), 400);
    }
  }
}

TEST(FieldSelector, MatchesDottedPaths) {
  json pod = {{"metadata", {{"name", "p"}, {"namespace", "ns"}}},
              {"spec", {{"nodeName", "n1"}}},
              {"status", {{"phase", "Running"}}}};
  auto s = FieldSelector::Parse("status.phase=Running,spec.nodeName!=n2,metadata.name==p");
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(s->Matches(pod));
  auto t = FieldSelector::Parse("spec.nodeName=");
  ASSERT_TRUE(t.ok());
  EXPECT_FALSE(t->Matches(pod));
  EXPECT_TRUE(t->Matches(json{{"spec", json::object()}}));
  EXPECT_FALSE(s->CheckAllowed({"metadata.name", "status.phase"}, "Pod").ok());
  EXPECT_TRUE(s->CheckAllowed({"metadata.name", "status.phase", "spec.nodeName"}, "Pod").ok());
  EXPECT_FALSE(FieldSelector::Parse("nonsense").ok());
}

}  // namespace
}  // namespace kubelocal
