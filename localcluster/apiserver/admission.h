// Per-type admission of a full object before it is stored, as the API
// server's registry strategies do it: defaults filled in and invalid fields
// collected as causes (a 422 with every cause). Custom resources are pruned,
// defaulted and validated against their CRD's schema; pods, services and
// namespaces get the built-in defaults and rules this server implements;
// a CRD is checked and, when valid, accepted (status names and conditions).
// `old` is null on create.
#pragma once

#include <string>
#include <vector>

#include "localcluster/apiserver/api_error.h"
#include "localcluster/apiserver/resources.h"

namespace kubelocal {

// `field_validation` is the request's fieldValidation ("", Ignore, Warn,
// Strict): Strict turns pruned fields into a 400, Warn into warnings.
Status AdmitCustomResource(const json& schema, const std::string& field_validation, json& obj,
                           std::vector<std::string>* warnings, std::vector<FieldCause>* causes);
void AdmitPod(json& obj, const json& old, std::vector<FieldCause>* causes);
void AdmitService(json& obj, const json& old, std::vector<FieldCause>* causes);
void AdmitNamespace(json& obj);
// `registered` is every type served now (a CRD's names must not clash with them).
Status AdmitCrd(json& obj, const std::vector<ResourceType>& registered, std::vector<FieldCause>* causes);

}  // namespace kubelocal
