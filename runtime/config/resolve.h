#pragma once
// Hydra/OmegaConf interpolation over a YAML document, resolved once, before
// any key is read (HyperPod recipes rely on it):
//   ${a.b.c}             absolute key path
//   ${recipes.a.b}       the HyperPod launcher's root ("recipes." names the
//                        recipe itself unless the document has a `recipes` key)
//   ${.x} / ${..x}       relative: a sibling of the key / of its parent
//   ${oc.env:VAR}        an environment variable (unset: an error)
//   ${oc.env:VAR,dflt}   ... with a default (`null` for none)
//   \${...}              a literal "${...}"
// A value that is exactly one reference takes the referenced value with its
// type (number, bool, map, null); references inside a longer string are
// substituted as text, and a null or a map there is an error. An unresolvable
// reference is an error naming the key and the reference; cycles are errors
// listing the chain.
#include <yaml-cpp/yaml.h>

#include "core/env_lookup.h"
#include "core/status.h"

namespace hypertrain::config {

// Reads one environment variable; nullptr when unset (core/env_lookup.h).
using EnvLookup = ::hypertrain::EnvLookup;

// Resolves every interpolation in `root` (a map) in place.
Status ResolveInterpolations(YAML::Node& root, const EnvLookup& env);

}  // namespace hypertrain::config
