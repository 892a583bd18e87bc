#include "localcluster/apiserver/table.h"

#include <chrono>

#include "core/time.h"

namespace kubelocal {
namespace {

struct Col {
  std::string name, type, format, description;
  int priority;
};

json ColumnDefs(const std::vector<Col>& cols) {
  json out = json::array();
  for (const auto& c : cols) {
    out.push_back({{"name", c.name},
                   {"type", c.type},
                   {"format", c.format},
                   {"description", c.description},
                   {"priority", c.priority}});
  }
  return out;
}

std::string Str(const json& o, const std::string& ptr, const std::string& def = "") {
  json::json_pointer p(ptr);
  if (!o.contains(p) || !o[p].is_string()) return def;
  return o[p].get<std::string>();
}

std::string Created(const json& o) { return HumanAge(Str(o, "/metadata/creationTimestamp")); }

void PodRow(const json& o, std::vector<Col>* cols, json* cells) {
  const std::string name = Str(o, "/metadata/name");
  *cols = {{"Name", "string", "name", "Name must be unique within a namespace.", 0},
           {"Ready", "string", "", "The aggregate readiness state of this pod.", 0},
           {"Status", "string", "", "The aggregate status of the containers in this pod.", 0},
           {"Restarts", "string", "", "The number of times the containers have restarted.", 0},
           {"Age", "string", "", "CreationTimestamp", 0},
           {"IP", "string", "", "IP address allocated to the pod.", 1},
           {"Node", "string", "", "Name of the node the pod is assigned to.", 1}};
  int total = o.contains("/spec/containers"_json_pointer) ? o["spec"]["containers"].size() : 0;
  int ready = 0, restarts = 0;
  if (o.contains("/status/containerStatuses"_json_pointer)) {
    for (const auto& cs : o["status"]["containerStatuses"]) {
      ready += cs.value("ready", false);
      restarts += cs.value("restartCount", 0);
    }
  }
  std::string status = Str(o, "/status/reason", Str(o, "/status/phase", "Pending"));
  if (o.contains("/metadata/deletionTimestamp"_json_pointer)) status = "Terminating";
  *cells = {name, std::to_string(ready) + "/" + std::to_string(total), status,
            std::to_string(restarts), Created(o), Str(o, "/status/podIP", "<none>"),
            Str(o, "/spec/nodeName", "<none>")};
}

void ServiceRow(const json& o, std::vector<Col>* cols, json* cells) {
  const std::string name = Str(o, "/metadata/name");
  *cols = {{"Name", "string", "name", "Name must be unique within a namespace.", 0},
           {"Type", "string", "", "The type of the service.", 0},
           {"Cluster-IP", "string", "", "The cluster IP of the service.", 0},
           {"External-IP", "string", "", "The external IP of the service.", 0},
           {"Port(s)", "string", "", "The ports of the service.", 0},
           {"Age", "string", "", "CreationTimestamp", 0}};
  std::string ports;
  if (o.contains("/spec/ports"_json_pointer)) {
    for (const auto& p : o["spec"]["ports"]) {
      if (!ports.empty()) ports += ",";
      ports += std::to_string(p.value("port", 0)) + "/" + p.value("protocol", "TCP");
    }
  }
  *cells = {name, Str(o, "/spec/type", "ClusterIP"), Str(o, "/spec/clusterIP", "<none>"),
            "<none>", ports.empty() ? "<none>" : ports, Created(o)};
}

void NodeRow(const json& o, std::vector<Col>* cols, json* cells) {
  const std::string name = Str(o, "/metadata/name");
  *cols = {{"Name", "string", "name", "Name must be unique within a namespace.", 0},
           {"Status", "string", "", "The status of the node", 0},
           {"Roles", "string", "", "The roles of the node", 0},
           {"Age", "string", "", "CreationTimestamp", 0},
           {"Version", "string", "", "Kubelet Version", 0}};
  std::string status = "Unknown";
  if (o.contains("/status/conditions"_json_pointer)) {
    for (const auto& c : o["status"]["conditions"]) {
      if (c.value("type", "") == "Ready") status = c.value("status", "") == "True" ? "Ready" : "NotReady";
    }
  }
  if (o.value("/spec/unschedulable"_json_pointer, false)) status += ",SchedulingDisabled";
  *cells = {name, status, "<none>", Created(o), Str(o, "/status/nodeInfo/kubeletVersion", "")};
}

void EventRow(const json& o, std::vector<Col>* cols, json* cells) {
  *cols = {{"Last Seen", "string", "", "Time since the last occurrence", 0},
           {"Type", "string", "", "Event type", 0},
           {"Reason", "string", "", "Reason", 0},
           {"Object", "string", "", "Involved object", 0},
           {"Message", "string", "", "Message", 0}};
  std::string last = Str(o, "/lastTimestamp", Str(o, "/eventTime", Str(o, "/metadata/creationTimestamp")));
  std::string kind = Str(o, "/involvedObject/kind");
  for (auto& c : kind) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  *cells = {HumanAge(last), Str(o, "/type"), Str(o, "/reason"),
            kind + "/" + Str(o, "/involvedObject/name"), Str(o, "/message")};
}

// Built-in columns and cells for core types.
bool BuiltinRow(const ResourceType& t, const json& o, std::vector<Col>* cols, json* cells) {
  const std::string name = Str(o, "/metadata/name");
  if (t.group.empty() && t.plural == "pods") {
    PodRow(o, cols, cells);
    return true;
  }
  if (t.group.empty() && t.plural == "services") {
    ServiceRow(o, cols, cells);
    return true;
  }
  if (t.group.empty() && t.plural == "namespaces") {
    *cols = {{"Name", "string", "name", "Name must be unique within a namespace.", 0},
             {"Status", "string", "", "The status of the namespace", 0},
             {"Age", "string", "", "CreationTimestamp", 0}};
    *cells = {name, Str(o, "/status/phase", "Active"), Created(o)};
    return true;
  }
  if (t.group.empty() && t.plural == "nodes") {
    NodeRow(o, cols, cells);
    return true;
  }
  if (t.group.empty() && t.plural == "events") {
    EventRow(o, cols, cells);
    return true;
  }
  if (t.group == "coordination.k8s.io" && t.plural == "leases") {
    *cols = {{"Name", "string", "name", "Name must be unique within a namespace.", 0},
             {"Holder", "string", "", "The holder of the lease", 0},
             {"Age", "string", "", "CreationTimestamp", 0}};
    *cells = {name, Str(o, "/spec/holderIdentity"), Created(o)};
    return true;
  }
  if (t.group == "apiextensions.k8s.io") {
    *cols = {{"Name", "string", "name", "Name must be unique within a namespace.", 0},
             {"Created At", "date", "", "CreationTimestamp", 0}};
    *cells = {name, Str(o, "/metadata/creationTimestamp")};
    return true;
  }
  return false;
}

void CrdRow(const ResourceType& t, const json& o, std::vector<Col>* cols, json* cells) {
  *cols = {{"Name", "string", "name", "Name must be unique within a namespace.", 0}};
  *cells = {Str(o, "/metadata/name")};
  if (t.columns.empty()) {
    cols->push_back({"Age", "date", "", "CreationTimestamp", 0});
    cells->push_back(Created(o));
    return;
  }
  for (const auto& c : t.columns) {
    cols->push_back({c.name, c.type == "date" ? "string" : c.type, c.format, c.description,
                     c.priority});
    auto found = JsonPathFind(o, c.json_path);
    if (!found.ok() || found->empty() || found->front().is_null()) {
      cells->push_back(nullptr);
      continue;
    }
    const json& v = found->front();
    if (c.type == "date" && v.is_string()) {
      cells->push_back(HumanAge(v.get<std::string>()));
    } else if (c.type == "string" && !v.is_string()) {
      cells->push_back(v.dump());
    } else {
      cells->push_back(v);
    }
  }
}

}  // namespace

StatusOr<std::vector<json>> JsonPathFind(const json& object, const std::string& raw) {
  std::string path = raw;
  if (path.size() >= 2 && path.front() == '{' && path.back() == '}') path = path.substr(1, path.size() - 2);
  if (!path.empty() && path[0] == '$') path = path.substr(1);
  std::vector<json> cur = {object};
  size_t i = 0;
  while (i < path.size()) {
    std::vector<json> next;
    if (path[i] == '.') {
      size_t j = i + 1;
      while (j < path.size() && path[j] != '.' && path[j] != '[') ++j;
      std::string field = path.substr(i + 1, j - i - 1);
      for (const auto& c : cur) {
        if (field.empty() || field == "*") {
          if (c.is_object()) for (const auto& [k, v] : c.items()) next.push_back(v);
        } else if (c.is_object() && c.contains(field)) {
          next.push_back(c[field]);
        }
      }
      i = j;
    } else if (path[i] == '[') {
      size_t j = path.find(']', i);
      if (j == std::string::npos) return BadRequest("unterminated [ in JSONPath " + raw);
      std::string inner = path.substr(i + 1, j - i - 1);
      for (const auto& c : cur) {
        if (!c.is_array()) continue;
        long n = static_cast<long>(c.size());
        if (inner == "*") {
          for (const auto& e : c) next.push_back(e);
        } else if (inner.rfind("?(@.", 0) == 0) {
          // [?(@.key=="value")]
          auto eq = inner.find("==");
          if (eq == std::string::npos) return BadRequest("unsupported filter in JSONPath " + raw);
          std::string key = inner.substr(4, eq - 4);
          std::string val = inner.substr(eq + 2);
          if (!val.empty() && val.back() == ')') val.pop_back();
          if (val.size() >= 2 && (val[0] == '"' || val[0] == '\'')) val = val.substr(1, val.size() - 2);
          for (const auto& e : c) {
            if (!e.is_object() || !e.contains(key)) continue;
            const json& f = e[key];
            if ((f.is_string() && f.get<std::string>() == val) || (!f.is_string() && f.dump() == val)) {
              next.push_back(e);
            }
          }
        } else if (auto colon = inner.find(':'); colon != std::string::npos) {
          std::string a = inner.substr(0, colon), b = inner.substr(colon + 1);
          long start = a.empty() ? 0 : std::stol(a);
          long end = b.empty() ? n : std::stol(b);
          if (start < 0) start += n;
          if (end < 0) end += n;
          start = std::max(0L, start);
          end = std::min(n, end);
          for (long k = start; k < end; ++k) next.push_back(c[k]);
        } else {
          long idx;
          try {
            idx = std::stol(inner);
          } catch (const std::exception&) {
            return BadRequest("unsupported index in JSONPath " + raw);
          }
          if (idx < 0) idx += n;
          if (idx >= 0 && idx < n) next.push_back(c[idx]);
        }
      }
      i = j + 1;
    } else {
      return BadRequest("unsupported JSONPath " + raw);
    }
    cur = std::move(next);
  }
  return cur;
}

std::string HumanAge(const std::string& ts) {
  if (ts.empty()) return "<unknown>";
  const auto then = hypertrain::ParseRfc3339(ts);
  if (!then) return "<invalid>";
  long s = static_cast<long>(
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now() - *then).count());
  if (s < 0) s = 0;
  if (s < 120) return std::to_string(s) + "s";
  long m = s / 60;
  if (m < 10) return s % 60 == 0 ? std::to_string(m) + "m" : std::to_string(m) + "m" + std::to_string(s % 60) + "s";
  if (m < 180) return std::to_string(m) + "m";
  long h = m / 60;
  if (h < 8) return m % 60 == 0 ? std::to_string(h) + "h" : std::to_string(h) + "h" + std::to_string(m % 60) + "m";
  if (h < 48) return std::to_string(h) + "h";
  long d = h / 24;
  if (h < 192) return h % 24 == 0 ? std::to_string(d) + "d" : std::to_string(d) + "d" + std::to_string(h % 24) + "h";
  if (d < 730) return std::to_string(d) + "d";
  return std::to_string(d / 365) + "y";
}

bool WantsTable(const std::string& accept) {
  // The first acceptable media type wins; kubectl lists Table first.
  size_t first = accept.find(',');
  std::string head = accept.substr(0, first);
  return head.find("as=Table") != std::string::npos && head.find("g=meta.k8s.io") != std::string::npos;
}

json MakeTable(const ResourceType& type, const std::vector<json>& objects, IncludeObject include,
               const std::string& resource_version, const std::string& continue_token,
               int64_t remaining) {
  std::vector<Col> cols;
  json rows = json::array();
  for (const auto& o : objects) {
    json cells;
    if (!BuiltinRow(type, o, &cols, &cells)) {
      if (type.is_crd) {
        CrdRow(type, o, &cols, &cells);
      } else {
        cols = {{"Name", "string", "name", "Name must be unique within a namespace.", 0},
                {"Age", "string", "", "CreationTimestamp", 0}};
        cells = {Str(o, "/metadata/name"), Created(o)};
      }
    }
    json row = {{"cells", cells}};
    if (include == IncludeObject::kObject) {
      row["object"] = o;
    } else if (include == IncludeObject::kMetadata) {
      row["object"] = {{"kind", "PartialObjectMetadata"},
                       {"apiVersion", "meta.k8s.io/v1"},
                       {"metadata", o.value("metadata", json::object())}};
    }
    rows.push_back(row);
  }
  if (objects.empty()) {
    // Column definitions do not depend on the rows; compute them from an empty object.
    json cells;
    if (!BuiltinRow(type, json::object(), &cols, &cells)) {
      if (type.is_crd) {
        CrdRow(type, json::object(), &cols, &cells);
      } else {
        cols = {{"Name", "string", "name", "Name must be unique within a namespace.", 0},
                {"Age", "string", "", "CreationTimestamp", 0}};
      }
    }
  }
  json meta = {{"resourceVersion", resource_version}};
  if (!continue_token.empty()) meta["continue"] = continue_token;
  if (remaining > 0) meta["remainingItemCount"] = remaining;
  return {{"kind", "Table"},
          {"apiVersion", "meta.k8s.io/v1"},
          {"metadata", meta},
          {"columnDefinitions", ColumnDefs(cols)},
          {"rows", rows}};
}

}  // namespace kubelocal
