#include "localcluster/apiserver/protobuf.h"

#include <cstdint>
#include <functional>
#include <vector>

#include "core/base64.h"

namespace kubelocal {
namespace {

struct Field {
  uint32_t number = 0;
  uint32_t wire = 0;
  uint64_t varint = 0;
  std::string bytes;  // length-delimited payload
};

// Splits one message into its fields; false on malformed input.
bool Parse(const std::string& in, std::vector<Field>* out) {
  size_t i = 0;
  auto varint = [&](uint64_t* v) {
    *v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (i >= in.size()) return false;
      uint8_t b = static_cast<uint8_t>(in[i++]);
      *v |= static_cast<uint64_t>(b & 0x7F) << shift;
      if (!(b & 0x80)) return true;
    }
    return false;
  };
  while (i < in.size()) {
    uint64_t key;
    if (!varint(&key)) return false;
    Field f;
    f.number = static_cast<uint32_t>(key >> 3);
    f.wire = static_cast<uint32_t>(key & 7);
    switch (f.wire) {
      case 0:
        if (!varint(&f.varint)) return false;
        break;
      case 1:
        if (i + 8 > in.size()) return false;
        i += 8;
        break;
      case 2: {
        uint64_t len;
        if (!varint(&len) || len > in.size() - i) return false;
        f.bytes = in.substr(i, len);
        i += len;
        break;
      }
      case 5:
        if (i + 4 > in.size()) return false;
        i += 4;
        break;
      default:
        return false;
    }
    out->push_back(std::move(f));
  }
  return true;
}

// map<string, string|bytes> entry: {1: key, 2: value}.
bool MapEntry(const std::string& bytes, bool base64, json* map) {
  std::vector<Field> fs;
  if (!Parse(bytes, &fs)) return false;
  std::string key, value;
  for (const auto& f : fs) {
    if (f.number == 1) key = f.bytes;
    if (f.number == 2) value = f.bytes;
  }
  (*map)[key] = base64 ? hypertrain::Base64Encode(value) : value;
  return true;
}

bool ObjectMeta(const std::string& bytes, json* meta) {
  std::vector<Field> fs;
  if (!Parse(bytes, &fs)) return false;
  *meta = json::object();
  for (const auto& f : fs) {
    switch (f.number) {
      case 1: (*meta)["name"] = f.bytes; break;
      case 2: (*meta)["generateName"] = f.bytes; break;
      case 3: (*meta)["namespace"] = f.bytes; break;
      case 11: if (!MapEntry(f.bytes, false, &(*meta)["labels"])) return false; break;
      case 12: if (!MapEntry(f.bytes, false, &(*meta)["annotations"])) return false; break;
      case 14: (*meta)["finalizers"].push_back(f.bytes); break;
      default: break;  // server-owned or unsupported fields
    }
  }
  return true;
}

}  // namespace

StatusOr<json> DecodeKubernetesProtobuf(const std::string& body) {
  const std::string magic("k8s\0", 4);
  Status bad = UnsupportedMediaType(
      "kube-local decodes protobuf only for v1 Namespace, ConfigMap, Secret and ServiceAccount; "
      "send application/json");
  if (body.compare(0, 4, magic) != 0) return BadRequest("protobuf body without the k8s envelope");
  std::vector<Field> env;
  if (!Parse(body.substr(4), &env)) return BadRequest("malformed protobuf envelope");
  std::string api_version, kind, raw;
  for (const auto& f : env) {
    if (f.number == 1) {
      std::vector<Field> tm;
      if (!Parse(f.bytes, &tm)) return BadRequest("malformed protobuf typeMeta");
      for (const auto& t : tm) {
        if (t.number == 1) api_version = t.bytes;
        if (t.number == 2) kind = t.bytes;
      }
    }
    if (f.number == 2) raw = f.bytes;
  }
  if (api_version != "v1") return bad;
  std::vector<Field> fs;
  if (!Parse(raw, &fs)) return BadRequest("malformed protobuf " + kind);
  json o = {{"apiVersion", api_version}, {"kind", kind}};
  for (const auto& f : fs) {
    if (f.number == 1) {
      if (!ObjectMeta(f.bytes, &o["metadata"])) return BadRequest("malformed protobuf metadata");
      continue;
    }
    bool ok = true;
    if (kind == "Namespace" && f.number == 2) {
      std::vector<Field> spec;
      ok = Parse(f.bytes, &spec);
      for (const auto& s : spec) {
        if (s.number == 1) o["spec"]["finalizers"].push_back(s.bytes);
      }
    } else if (kind == "ConfigMap") {
      if (f.number == 2) ok = MapEntry(f.bytes, false, &o["data"]);
      if (f.number == 3) ok = MapEntry(f.bytes, true, &o["binaryData"]);
      if (f.number == 4) o["immutable"] = f.varint != 0;
    } else if (kind == "Secret") {
      if (f.number == 2) ok = MapEntry(f.bytes, true, &o["data"]);
      if (f.number == 3) o["type"] = f.bytes;
      if (f.number == 4) ok = MapEntry(f.bytes, false, &o["stringData"]);
      if (f.number == 5) o["immutable"] = f.varint != 0;
    } else if (kind == "ServiceAccount") {
      if (f.number == 4) o["automountServiceAccountToken"] = f.varint != 0;
    } else if (kind != "Namespace") {
      return bad;
    }
    if (!ok) return BadRequest("malformed protobuf " + kind);
  }
  if (kind == "Secret" && o.contains("stringData")) {
    // The apiserver folds stringData into data.
    for (auto& [k, v] : o["stringData"].items()) o["data"][k] = hypertrain::Base64Encode(v.get<std::string>());
    o.erase("stringData");
  }
  return o;
}

}  // namespace kubelocal
