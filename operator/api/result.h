// Error and Result<T> for the operator's API layer. The operator does not
// depend on runtime/, so it carries its own small expected-style type.
#ifndef HYPERTRAIN_OPERATOR_API_RESULT_H_
#define HYPERTRAIN_OPERATOR_API_RESULT_H_

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace hypertrain::api {

// A validation or parse error. `field` is a JSON path such as
// "spec.trainerConfig.inline: model.shard_degree"; `message` says what is wrong
// and what is accepted.
struct Error {
  std::string field;
  std::string message;

  std::string ToString() const {
    return field.empty() ? message : field + ": " + message;
  }
};

template <typename T>
class Result {
 public:
  Result(T value) : v_(std::move(value)) {}          // NOLINT: implicit by design
  Result(Error error) : v_(std::move(error)) {}      // NOLINT: implicit by design

  bool ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return ok(); }

  const T& value() const& {
    assert(ok());
    return std::get<T>(v_);
  }
  T& value() & {
    assert(ok());
    return std::get<T>(v_);
  }
  T&& value() && {
    assert(ok());
    return std::get<T>(std::move(v_));
  }
  const T& operator*() const& { return value(); }
  const T* operator->() const { return &value(); }

  const Error& error() const {
    assert(!ok());
    return std::get<Error>(v_);
  }

 private:
  std::variant<T, Error> v_;
};

}  // namespace hypertrain::api

#endif  // HYPERTRAIN_OPERATOR_API_RESULT_H_
