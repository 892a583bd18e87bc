#!/usr/bin/env python3
"""Writes the core/v1 parts of the TrainingJob CRD from the Kubernetes OpenAPI.

spec.volumes, spec.volumeMounts, spec.env[].valueFrom and spec.podTemplate.spec
are the upstream Volume, VolumeMount, EnvVarSource and PodSpec of the supported
Kubernetes version, made structural (no preserve-unknown-fields), so the API
server drops or, under fieldValidation=Strict (kubectl's default), rejects a
misspelled field instead of storing it for the pod to lose (issue 35, item 2).
Descriptions and defaults are left out (size; the pod gets its defaults when it
is created); the operator's own rules (reserved names, owned fields, limits) are
OVERRIDES below, merged over the generated schemas.

Usage: tools/crd_core_schemas.sh (starts the real kube-apiserver, fetches
/openapi/v3/api/v1 and runs this), or
    crd_core_schemas.py OPENAPI_V3_JSON CRD_YAML   # rewrites the marked blocks in place
A block is the lines between "# BEGIN GENERATED <name>" and "# END GENERATED <name>".
"""
import json
import re
import sys

PREFIX = "io.k8s.api.core.v1."
QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"
INT_OR_STRING = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
LABEL_SELECTOR = "io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector"
QUANTITY_PATTERN = (r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|"
                    r"([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$")
DNS_LABEL = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"


def ref_name(node):
    if "$ref" in node:
        return node["$ref"].rsplit("/", 1)[-1]
    for sub in node.get("allOf", []):
        if "$ref" in sub:
            return sub["$ref"].rsplit("/", 1)[-1]
    return None


class Generator:
    def __init__(self, schemas):
        self.schemas = schemas

    def named(self, name, stack=()):
        if name == QUANTITY:
            return {"x-kubernetes-int-or-string": True, "anyOf": [{"type": "integer"}, {"type": "string"}],
                    "pattern": QUANTITY_PATTERN, "maxLength": 64}
        if name == INT_OR_STRING:
            return {"x-kubernetes-int-or-string": True}
        if name == OBJECT_META:
            # Only labels and annotations of an embedded object's metadata are used.
            return {"type": "object", "properties": {
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "annotations": {"type": "object", "additionalProperties": {"type": "string"}}}}
        if name in stack:
            raise SystemExit("recursive schema " + " -> ".join(stack + (name,)))
        return self.node(self.schemas[name], stack + (name,))

    def node(self, s, stack):
        name = ref_name(s)
        if name:
            return self.named(name, stack)
        out = {}
        t = s.get("type")
        if t:
            out["type"] = t
        if t in ("integer", "number") and s.get("format") in ("int32", "int64", "double", "float"):
            out["format"] = s["format"]
        if "enum" in s:
            out["enum"] = list(s["enum"])
        if t == "object" or "properties" in s:
            out["type"] = "object"
            props = s.get("properties", {})
            if props:
                out["properties"] = {k: self.node(v, stack) for k, v in sorted(props.items())}
            if "additionalProperties" in s:
                out["additionalProperties"] = self.node(s["additionalProperties"], stack)
                if ref_name(s["additionalProperties"]) == QUANTITY:  # resource lists
                    out["maxProperties"] = 32
            if s.get("required"):
                out["required"] = sorted(s["required"])
        if t == "array":
            out["items"] = self.node(s["items"], stack)
            for k in ("x-kubernetes-list-type", "x-kubernetes-list-map-keys"):
                if k in s and s.get("x-kubernetes-list-type") != "map":
                    out[k] = s[k]
        if t == "string" and s.get("format") == "byte":
            out["format"] = "byte"
        return out


def merge(base, over):
    """OVERRIDES: dicts merge, None deletes, anything else replaces."""
    for k, v in over.items():
        if v is None:
            base.pop(k, None)
        elif isinstance(v, dict) and isinstance(base.get(k), dict):
            merge(base[k], v)
        else:
            base[k] = v
    return base


RESERVED_VOLUME = {"rule": "!(self.name in ['dshm', 'hypertrain-config'])",
                   "message": "volume names dshm and hypertrain-config are reserved"}


def volume_items(gen):
    vol = gen.named(PREFIX + "Volume")
    sources = sorted(k for k in vol["properties"] if k != "name")
    # The API server turns a volume with no source into an emptyDir: one that
    # lost a misspelled source must not silently become ephemeral.
    count = " + ".join("(has(self.%s) ? 1 : 0)" % s for s in sources)
    return merge(vol, {
        "required": ["name"],
        "x-kubernetes-validations": [
            RESERVED_VOLUME,
            {"rule": count + " == 1",
             "message": "a volume needs exactly one volume source (persistentVolumeClaim, emptyDir, configMap, "
                        "secret, csi, hostPath, ...; core/v1 Volume)"}],
        "properties": {"name": {"minLength": 1, "maxLength": 63, "pattern": DNS_LABEL}},
    })


def volumes(gen):
    return {"type": "array", "maxItems": 64, "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
            "items": volume_items(gen)}


def volume_mounts(gen, top_level):
    m = gen.named(PREFIX + "VolumeMount")
    merge(m, {"properties": {"name": {"minLength": 1, "maxLength": 63},
                             "mountPath": {"minLength": 1, "maxLength": 1024, "pattern": "^/"},
                             "subPath": {"maxLength": 1024}}})
    out = {"type": "array", "items": m}
    if top_level:
        out["maxItems"] = 64
        out["description"] = "Mounts of the trainer container (core/v1 VolumeMount)."
    return out


def container(gen, init):
    c = gen.named(PREFIX + "Container")
    rules = ([{"rule": "self.name != 'trainer'", "message": "trainer is the operator's container"}] if init else [
        {"rule": "self.name != 'trainer' || (!has(self.image) && !has(self.imagePullPolicy) && "
                 "!has(self.command) && !has(self.args))",
         "message": "the trainer container's image, imagePullPolicy, command and args are spec.image, "
                    "spec.imagePullPolicy, spec.command and spec.args"},
        {"rule": "self.name == 'trainer' || has(self.image)", "message": "a sidecar container needs an image"}])
    rules.append({"rule": "!has(self.ports) || self.ports.all(p, !has(p.name) || !(p.name in ['rendezvous', 'metrics']))",
                  "message": "port names rendezvous and metrics are the operator's"})
    merge(c, {"required": ["image", "name"] if init else ["name"],
              "x-kubernetes-validations": rules,
              "properties": {"name": {"minLength": 1, "maxLength": 63, "pattern": DNS_LABEL},
                             "image": {"maxLength": 512},
                             "ports": {"maxItems": 64},
                             "volumeMounts": volume_mounts(gen, False)}})
    return {"type": "array", "maxItems": 16, "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
            "items": c}


def pod_spec(gen):
    spec = gen.named(PREFIX + "PodSpec")
    return merge(spec, {
        "x-kubernetes-validations": [
            {"rule": "!has(self.hostname) && !has(self.subdomain) && !has(self.restartPolicy) && "
                     "!has(self.nodeName) && !has(self.schedulingGates)",
             "message": "hostname, subdomain, restartPolicy, nodeName and schedulingGates are the operator's"},
            {"rule": "!has(self.serviceAccountName) && !has(self.serviceAccount)",
             "message": "set spec.serviceAccountName"},
            {"rule": "!has(self.nodeSelector) && !has(self.affinity) && !has(self.tolerations) && "
                     "!has(self.schedulerName) && !has(self.priorityClassName) && !has(self.priority) && "
                     "!has(self.terminationGracePeriodSeconds)",
             "message": "placement is spec.scheduling's: nodeSelector, affinity, tolerations, schedulerName, "
                        "priorityClassName, terminationGracePeriodSeconds"}],
        "required": None,  # containers: the operator's trainer is always there
        "properties": {
            # Refused by the rules above: no need to describe them in full.
            "affinity": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            "tolerations": {"type": "array", "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
            # Not settable when a pod is created.
            "ephemeralContainers": None,
            "containers": container(gen, False),
            "initContainers": container(gen, True),
            "volumes": volumes(gen),
            "imagePullSecrets": {"maxItems": 16, "items": {"required": ["name"],
                                                           "properties": {"name": {"minLength": 1, "maxLength": 253}}}},
        },
    })


def env_source(gen):
    return merge(gen.named(PREFIX + "EnvVarSource"), {"description": "core/v1 EnvVarSource: exactly one source."})


def blocks(gen):
    return {
        "volumes": merge(volumes(gen), {"description": "Pod volumes (core/v1 Volume), e.g. an FSx for Lustre PVC."}),
        "volumeMounts": volume_mounts(gen, True),
        "envValueFrom": env_source(gen),
        "podTemplateSpec": pod_spec(gen),
    }


PLAIN = re.compile(r"^[A-Za-z_][-A-Za-z0-9_./]*$")
YAML_WORDS = {"true", "false", "yes", "no", "on", "off", "null", "y", "n", "~"}


def scalar(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return json.dumps(v)
    if PLAIN.match(v) and v.lower() not in YAML_WORDS:
        return v
    return json.dumps(v)


def emit(node, indent):
    """Block YAML in the CRD's style; short scalar lists in flow style."""
    pad = " " * indent
    lines = []
    for k, v in node.items():
        key = scalar(k)
        if isinstance(v, dict):
            if not v:
                lines.append("%s%s: {}" % (pad, key))
            else:
                lines.append("%s%s:" % (pad, key))
                lines += emit(v, indent + 2)
        elif isinstance(v, list):
            if all(not isinstance(x, (dict, list)) for x in v):
                lines.append("%s%s: [%s]" % (pad, key, ", ".join(scalar(x) for x in v)))
            else:
                lines.append("%s%s:" % (pad, key))
                for item in v:
                    sub = emit(item, indent + 4)
                    lines.append(pad + "  - " + sub[0].lstrip())
                    lines += sub[1:]
        else:
            lines.append("%s%s: %s" % (pad, key, scalar(v)))
    return lines


def rewrite(crd_text, generated):
    out, i, lines, done = [], 0, crd_text.split("\n"), set()
    while i < len(lines):
        line = lines[i]
        out.append(line)
        m = re.match(r"^( *)# BEGIN GENERATED (\w+)", line)
        i += 1
        if not m:
            continue
        indent, name = len(m.group(1)), m.group(2)
        if name not in generated:
            raise SystemExit("unknown generated block " + name)
        while i < len(lines) and not re.match(r"^ *# END GENERATED " + name + r"\b", lines[i]):
            i += 1
        if i == len(lines):
            raise SystemExit("no END GENERATED " + name)
        out += emit(generated[name], indent)
        done.add(name)
    missing = set(generated) - done
    if missing:
        raise SystemExit("blocks not marked in the CRD: " + ", ".join(sorted(missing)))
    return "\n".join(out)


def main():
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    with open(sys.argv[1]) as f:
        doc = json.load(f)
    gen = Generator(doc["components"]["schemas"])
    with open(sys.argv[2]) as f:
        text = f.read()
    text = rewrite(text, blocks(gen))
    with open(sys.argv[2] + ".tmp", "w") as f:
        f.write(text)
    import os
    os.replace(sys.argv[2] + ".tmp", sys.argv[2])


if __name__ == "__main__":
    main()
