#include "localcluster/apiserver/protobuf.h"

#include <gtest/gtest.h>

namespace kubelocal {
namespace {

// Minimal encoder for building test messages.
std::string Varint(uint64_t v) {
  std::string s;
  while (v >= 0x80) {
    s.push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  s.push_back(static_cast<char>(v));
  return s;
}
std::string Bytes(int field, const std::string& payload) {
  return Varint((field << 3) | 2) + Varint(payload.size()) + payload;
}
std::string Bool(int field, bool v) { return Varint(field << 3) + Varint(v ? 1 : 0); }
std::string Entry(int field, const std::string& k, const std::string& v) {
  return Bytes(field, Bytes(1, k) + Bytes(2, v));
}
std::string Envelope(const std::string& kind, const std::string& raw) {
  return std::string("k8s\0", 4) + Bytes(1, Bytes(1, "v1") + Bytes(2, kind)) + Bytes(2, raw) +
         Bytes(4, "application/vnd.kubernetes.protobuf");
}

TEST(Protobuf, NamespaceAndConfigMapAndSecret) {
  std::string meta = Bytes(1, "team") + Entry(11, "a", "b") + Bytes(14, "f1");
  auto ns = DecodeKubernetesProtobuf(Envelope("Namespace", Bytes(1, meta) + Bytes(2, Bytes(1, "kubernetes"))));
  ASSERT_TRUE(ns.ok()) << ns.status().message();
  EXPECT_EQ((*ns)["kind"], "Namespace");
  EXPECT_EQ((*ns)["metadata"]["name"], "team");
  EXPECT_EQ((*ns)["metadata"]["labels"]["a"], "b");
  EXPECT_EQ((*ns)["metadata"]["finalizers"], json({"f1"}));
  EXPECT_EQ((*ns)["spec"]["finalizers"], json({"kubernetes"}));
  auto cm = DecodeKubernetesProtobuf(Envelope(
      "ConfigMap", Bytes(1, Bytes(1, "c") + Bytes(3, "ns")) + Entry(2, "k", "v") + Entry(3, "bin", "hi!") + Bool(4, true)));
  ASSERT_TRUE(cm.ok());
  EXPECT_EQ((*cm)["data"]["k"], "v");
  EXPECT_EQ((*cm)["binaryData"]["bin"], "aGkh");
  EXPECT_EQ((*cm)["immutable"], true);
  auto sec = DecodeKubernetesProtobuf(Envelope("Secret", Bytes(1, Bytes(1, "s")) + Entry(4, "p", "pw") + Bytes(3, "Opaque")));
  ASSERT_TRUE(sec.ok());
  EXPECT_EQ((*sec)["data"]["p"], "cHc=");
  EXPECT_EQ((*sec)["type"], "Opaque");
}

TEST(Protobuf, RejectsUnknownKindsAndGarbage) {
  auto pod = DecodeKubernetesProtobuf(Envelope("Pod", Bytes(1, Bytes(1, "p")) + Bytes(2, "x")));
  ASSERT_FALSE(pod.ok());
  EXPECT_EQ(HttpCode(pod.status()), 415);
  EXPECT_EQ(HttpCode(DecodeKubernetesProtobuf("not protobuf").status()), 400);
  EXPECT_EQ(HttpCode(DecodeKubernetesProtobuf(std::string("k8s\0\x0a\xff", 6)).status()), 400);
}

}  // namespace
}  // namespace kubelocal
