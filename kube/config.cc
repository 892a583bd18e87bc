#include "kube/config.h"

#include <yaml-cpp/yaml.h>

#include <cstdlib>
#include <map>
#include <sstream>

#include "core/atomic_file.h"
#include "core/base64.h"

namespace kube {
namespace {

std::string JoinPath(const std::string& dir, const std::string& p) {
  if (p.empty() || p[0] == '/' || dir.empty()) return p;
  return dir + "/" + p;
}

// A file the configuration names; unreadable is a configuration error.
StatusOr<std::string> ReadConfigFile(const std::string& path) {
  auto text = hypertrain::ReadFileToString(path);
  if (!text.ok()) return hypertrain::InvalidArgument(text.status().message());  // "no file <path>", "open <path>: ..."
  return text;
}

std::string DirName(const std::string& path) {
  auto pos = path.rfind('/');
  if (pos == std::string::npos) return ".";
  if (pos == 0) return "/";
  return path.substr(0, pos);
}

Json YamlToJson(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      return nullptr;
    case YAML::NodeType::Scalar: {
      const std::string& s = n.Scalar();
      if (n.Tag() == "!") return s;  // quoted: always a string
      if (s == "true" || s == "True") return true;
      if (s == "false" || s == "False") return false;
      if (s == "null" || s == "~") return nullptr;
      return s;
    }
    case YAML::NodeType::Sequence: {
      Json a = Json::array();
      for (const auto& c : n) a.push_back(YamlToJson(c));
      return a;
    }
    case YAML::NodeType::Map: {
      Json o = Json::object();
      for (const auto& kv : n) o[kv.first.as<std::string>()] = YamlToJson(kv.second);
      return o;
    }
  }
  return nullptr;
}

std::string Str(const Json& o, const char* key) {
  auto it = o.find(key);
  if (it == o.end() || !it->is_string()) return "";
  return it->get<std::string>();
}

// A named entry of clusters/users/contexts plus the directory of its file.
struct Entry {
  Json body;
  std::string dir;
};

struct Merged {
  std::map<std::string, Entry> clusters, users, contexts;
  std::string current_context;
};

Status MergeDoc(const Json& doc, const std::string& dir, Merged* m) {
  if (!doc.is_object()) return hypertrain::InvalidArgument("kubeconfig is not a YAML mapping");
  auto merge = [&](const char* list, const char* inner,
                   std::map<std::string, Entry>* out) -> Status {
    auto it = doc.find(list);
    if (it == doc.end() || it->is_null()) return {};
    if (!it->is_array())
      return hypertrain::InvalidArgument(std::string("kubeconfig: ") + list + " is not a list");
    for (const auto& e : *it) {
      std::string name = Str(e, "name");
      if (name.empty())
        return hypertrain::InvalidArgument(std::string("kubeconfig: ") + list +
                                           " entry without name");
      if (out->count(name)) continue;  // first definition wins
      Json body = e.contains(inner) && e[inner].is_object() ? e[inner] : Json::object();
      (*out)[name] = Entry{body, dir};
    }
    return {};
  };
  HT_RETURN_IF_ERROR(merge("clusters", "cluster", &m->clusters));
  HT_RETURN_IF_ERROR(merge("users", "user", &m->users));
  HT_RETURN_IF_ERROR(merge("contexts", "context", &m->contexts));
  if (m->current_context.empty()) m->current_context = Str(doc, "current-context");
  return {};
}

StatusOr<std::string> DataOrFile(const Json& o, const char* data_key, const char* file_key,
                                 const std::string& dir) {
  std::string data = Str(o, data_key);
  if (!data.empty()) {
    auto decoded = hypertrain::Base64Decode(data);
    if (!decoded.ok()) return decoded.status().WithMessage(std::string(data_key) + " is not valid base64: " + decoded.status().message());
    return decoded;
  }
  std::string file = Str(o, file_key);
  if (!file.empty()) return ReadConfigFile(JoinPath(dir, file));
  return std::string();
}

StatusOr<Config> Resolve(const Merged& m, const std::string& context_override) {
  std::string ctx_name = context_override.empty() ? m.current_context : context_override;
  if (ctx_name.empty()) return hypertrain::InvalidArgument("kubeconfig: no current-context set");
  auto ctx_it = m.contexts.find(ctx_name);
  if (ctx_it == m.contexts.end())
    return hypertrain::InvalidArgument("kubeconfig: context \"" + ctx_name + "\" not found");
  const Json& ctx = ctx_it->second.body;
  std::string cluster_name = Str(ctx, "cluster");
  auto cl_it = m.clusters.find(cluster_name);
  if (cl_it == m.clusters.end())
    return hypertrain::InvalidArgument("kubeconfig: cluster \"" + cluster_name + "\" (context \"" +
                                       ctx_name + "\") not found");
  Config c;
  const Json& cl = cl_it->second.body;
  c.server = Str(cl, "server");
  if (c.server.empty())
    return hypertrain::InvalidArgument("kubeconfig: cluster \"" + cluster_name +
                                       "\" has no server");
  if (cl.contains("insecure-skip-tls-verify") && cl["insecure-skip-tls-verify"].is_boolean())
    c.insecure_skip_tls_verify = cl["insecure-skip-tls-verify"].get<bool>();
  c.tls_server_name = Str(cl, "tls-server-name");
  {
    auto ca =
        DataOrFile(cl, "certificate-authority-data", "certificate-authority", cl_it->second.dir);
    if (!ca.ok()) return ca.status();
    c.ca_pem = *ca;
  }
  std::string ns = Str(ctx, "namespace");
  if (!ns.empty()) c.namespace_name = ns;

  std::string user_name = Str(ctx, "user");
  if (!user_name.empty()) {
    auto u_it = m.users.find(user_name);
    if (u_it == m.users.end())
      return hypertrain::InvalidArgument("kubeconfig: user \"" + user_name + "\" not found");
    const Json& u = u_it->second.body;
    const std::string& dir = u_it->second.dir;
    c.token = Str(u, "token");
    std::string tf = Str(u, "tokenFile");
    if (!tf.empty()) c.token_file = JoinPath(dir, tf);
    auto cert = DataOrFile(u, "client-certificate-data", "client-certificate", dir);
    if (!cert.ok()) return cert.status();
    auto key = DataOrFile(u, "client-key-data", "client-key", dir);
    if (!key.ok()) return key.status();
    c.client_cert_pem = *cert;
    c.client_key_pem = *key;
    if (c.client_cert_pem.empty() != c.client_key_pem.empty())
      return hypertrain::InvalidArgument("kubeconfig: user \"" + user_name +
                                         "\" has a client certificate without a key or vice versa");
    if (u.contains("exec") && u["exec"].is_object()) {
      const Json& e = u["exec"];
      ExecConfig ex;
      ex.api_version = Str(e, "apiVersion");
      if (ex.api_version != "client.authentication.k8s.io/v1beta1" &&
          ex.api_version != "client.authentication.k8s.io/v1")
        return hypertrain::InvalidArgument("kubeconfig: exec plugin apiVersion \"" +
                                           ex.api_version + "\" is not supported");
      ex.command = Str(e, "command");
      if (ex.command.empty())
        return hypertrain::InvalidArgument("kubeconfig: exec without command");
      // A relative command with a slash resolves against the kubeconfig directory.
      if (ex.command.find('/') != std::string::npos) ex.command = JoinPath(dir, ex.command);
      if (e.contains("args") && e["args"].is_array())
        for (const auto& a : e["args"])
          ex.args.push_back(a.is_string() ? a.get<std::string>() : a.dump());
      if (e.contains("env") && e["env"].is_array())
        for (const auto& kv : e["env"]) ex.env.emplace_back(Str(kv, "name"), Str(kv, "value"));
      if (e.contains("provideClusterInfo") && e["provideClusterInfo"].is_boolean())
        ex.provide_cluster_info = e["provideClusterInfo"].get<bool>();
      c.exec = ex;
    }
    if (u.contains("auth-provider"))
      return hypertrain::InvalidArgument(
          "kubeconfig: auth-provider plugins are not supported; use exec");
  }
  return c;
}

}  // namespace

StatusOr<Config> LoadKubeconfigText(const std::string& yaml, const std::string& base_dir,
                                    const std::string& context) {
  Merged m;
  try {
    HT_RETURN_IF_ERROR(MergeDoc(YamlToJson(YAML::Load(yaml)), base_dir, &m));
  } catch (const YAML::Exception& e) {
    return hypertrain::InvalidArgument(std::string("kubeconfig: invalid YAML: ") + e.what());
  }
  return Resolve(m, context);
}

StatusOr<Config> LoadKubeconfig(const std::vector<std::string>& paths, const std::string& context) {
  Merged m;
  int loaded = 0;
  for (const auto& p : paths) {
    if (p.empty()) continue;
    auto text = hypertrain::ReadFileToString(p);
    if (!text.ok()) {
      if (paths.size() == 1) return hypertrain::InvalidArgument("kubeconfig: " + text.status().message());
      continue;  // like kubectl: missing entries of a KUBECONFIG list are skipped
    }
    try {
      auto r = MergeDoc(YamlToJson(YAML::Load(*text)), DirName(p), &m);
      if (!r.ok()) {
        return r.WithMessage(p + ": " + r.message());
      }
    } catch (const YAML::Exception& e) {
      return hypertrain::InvalidArgument(p + ": invalid YAML: " + e.what());
    }
    ++loaded;
  }
  if (loaded == 0) return hypertrain::InvalidArgument("no readable kubeconfig file");
  return Resolve(m, context);
}

StatusOr<Config> LoadKubeconfigFromEnv(const std::string& context) {
  std::vector<std::string> paths;
  if (const char* kc = std::getenv("KUBECONFIG"); kc && *kc) {
    std::string s(kc);
    size_t start = 0;
    while (start <= s.size()) {
      auto end = s.find(':', start);
      if (end == std::string::npos) end = s.size();
      paths.push_back(s.substr(start, end - start));
      start = end + 1;
    }
  } else if (const char* home = std::getenv("HOME"); home && *home) {
    paths.push_back(std::string(home) + "/.kube/config");
  } else {
    return hypertrain::InvalidArgument("neither KUBECONFIG nor HOME is set");
  }
  return LoadKubeconfig(paths, context);
}

StatusOr<Config> LoadInCluster(const std::string& sa_dir) {
  const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
  const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
  if (!host || !*host || !port || !*port)
    return hypertrain::InvalidArgument(
        "not in a cluster: KUBERNETES_SERVICE_HOST/PORT are not set");
  Config c;
  std::string h(host);
  if (h.find(':') != std::string::npos) h = "[" + h + "]";  // IPv6 literal
  c.server = "https://" + h + ":" + port;
  c.token_file = sa_dir + "/token";
  auto tok = ReadConfigFile(c.token_file);
  if (!tok.ok()) return tok.status();
  auto ca = ReadConfigFile(sa_dir + "/ca.crt");
  if (!ca.ok()) return ca.status();
  c.ca_pem = *ca;
  auto ns = ReadConfigFile(sa_dir + "/namespace");
  if (ns.ok()) {
    std::string n = *ns;
    while (!n.empty() && (n.back() == '\n' || n.back() == ' ')) n.pop_back();
    if (!n.empty()) c.namespace_name = n;
  }
  return c;
}

StatusOr<Config> LoadDefault() {
  if (const char* h = std::getenv("KUBERNETES_SERVICE_HOST"); h && *h) return LoadInCluster();
  return LoadKubeconfigFromEnv();
}

std::string Config::DebugString() const {
  std::ostringstream o;
  auto red = [](const std::string& s) {
    return s.empty() ? std::string("<none>") : std::string("<redacted>");
  };
  o << "server: " << server << "\n"
    << "namespace: " << namespace_name << "\n"
    << "ca: " << (ca_pem.empty() ? "<system>" : std::to_string(ca_pem.size()) + " bytes PEM")
    << "\n"
    << "insecure-skip-tls-verify: " << (insecure_skip_tls_verify ? "true" : "false") << "\n"
    << "client-certificate: " << (client_cert_pem.empty() ? "<none>" : "<present>") << "\n"
    << "client-key: " << red(client_key_pem) << "\n"
    << "token: " << red(token) << "\n"
    << "tokenFile: " << (token_file.empty() ? "<none>" : token_file) << "\n"
    << "exec: "
    << (exec ? exec->command + " (" + std::to_string(exec->args.size()) +
                   " args, env values <redacted>)"
             : "<none>")
    << "\n"
    << "qps: " << qps << " burst: " << burst << " timeout_ms: " << request_timeout.count()
    << " max_retries: " << max_retries << "\n";
  return o.str();
}

}  // namespace kube
