// Anomaly mode (autograd/graph.h, Note [Anomaly mode] in autograd/anomaly_mode.cpp): the first
// op whose forward output or backward gradient holds NaN/Inf is named, with the element, the
// shape and (in backward) how the forward created the node; nothing is checked when the mode is
// off; the guard restores the previous state through nesting, exceptions and threads; the same on
// the cuda device.
#include <thread>

#include "cuda/runtime.h"
#include "ember.h"
#include "support/test_support.h"

using namespace ember;
using autograd::TensorList;
using Catch::Contains;

namespace {

Tensor vec(std::vector<float> v, Device device = Device::cpu()) { return tensor<float>(v).to(device); }

// The message of the AnomalyError that fn throws, or "(no anomaly)". Another ember::Error is
// not what these tests expect, so it escapes and fails the test.
std::string anomaly_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const autograd::AnomalyError& e) {
    return e.what();
  }
  return "(no anomaly)";
}

// y = x * factor in forward; backward returns {g * factor, dnan}: a node whose forward is finite
// and whose gradient for its second input is whatever `dsecond` holds.
Tensor scale_with_bad_backward(const Tensor& x, const Tensor& second, const Tensor& dsecond) {
  Tensor y;
  {
    autograd::NoGradGuard no_grad;
    y = mul(x, 2.0);
  }
  autograd::record("scale_with_bad_backward", {x, second}, y,
                   [dsecond](const Tensor& g) -> TensorList { return {mul(g, 2.0), dsecond}; });
  return y;
}

}  // namespace

TEST_CASE("anomaly: a forward that produces NaN names the op, the element and the shape", "[autograd][anomaly]") {
  Tensor x = vec({1, -1, 2, -3}).reshape({2, 2}).detach().requires_grad_();
  autograd::DetectAnomalyGuard anomaly;
  const std::string message = anomaly_of([&] { (void)log(mul(x, 1.0)); });
  CHECK_THAT(message, Contains("anomaly: forward of log produced NaN at element 1 of (2, 2)"));
  CHECK_THAT(message, Contains("2 NaN, 0 Inf among 4 elements"));
  CHECK_THAT(message, Contains("from finite inputs (2, 2)"));
  // Infinite outputs too: the first one is named with its sign.
  CHECK_THAT(anomaly_of([&] { (void)div(x, 0.0); }), Contains("forward of div produced Inf at element 0 of (2, 2) (0 NaN, 4 Inf"));
  CHECK_THAT(anomaly_of([&] { (void)log(sub(x, x)); }), Contains("forward of log produced -Inf at element 0"));
}

TEST_CASE("anomaly: a non-finite input that came from outside the graph is reported as such", "[autograd][anomaly]") {
  Tensor x = vec({1, NAN, 2}).requires_grad_();  // a leaf that already holds NaN
  autograd::DetectAnomalyGuard anomaly;
  const std::string message = anomaly_of([&] { (void)exp(x); });
  CHECK_THAT(message, Contains("forward of exp produced NaN at element 1 of (3,)"));
  CHECK_THAT(message, Contains("its input 0 already holds NaN at element 1 of (3,)"));
}

TEST_CASE("anomaly: a finite forward whose gradient is infinite names the backward node", "[autograd][anomaly]") {
  // sqrt(0) = 0 is finite; its gradient 0.5 / sqrt(0) is not.
  Tensor x = vec({0, 1, 4}).requires_grad_();
  autograd::DetectAnomalyGuard anomaly;
  Tensor loss = sum(mul(sqrt(mul(x, 1.0)), 3.0));
  CHECK(std::isfinite(loss.item()));
  const std::string message = anomaly_of([&] { loss.backward(); });
  CHECK_THAT(message, Contains("anomaly: backward of sqrt returned Inf at element 0 of (3,)"));
  CHECK_THAT(message, Contains("in the gradient of its input 0"));
  CHECK_THAT(message, Contains("created in forward as op #"));
  CHECK_THAT(message, Contains(": sqrt((3,)) -> (3,)"));
  CHECK_FALSE(x.grad().defined());  // the pass stopped before the gradient reached the leaf
}

TEST_CASE("anomaly: the node whose backward returns NaN is named, with the input", "[autograd][anomaly]") {
  Tensor x = vec({1, 2}).requires_grad_(), w = vec({3, 4}).requires_grad_();
  autograd::DetectAnomalyGuard anomaly;
  // The node that returned the NaN is named, not exp, which is next in the backward order.
  Tensor y = scale_with_bad_backward(exp(x), w, vec({0, NAN}));
  const std::string message = anomaly_of([&] { sum(y).backward(); });
  CHECK_THAT(message, Contains("backward of scale_with_bad_backward returned NaN at element 1 of (2,)"));
  CHECK_THAT(message, Contains("gradient of its input 1"));
  CHECK_THAT(message, Contains("scale_with_bad_backward((2,), (2,)) -> (2,)"));
  // A gradient for an input that needs none reaches nobody and is not an anomaly.
  Tensor constant = vec({3, 4});
  Tensor z = scale_with_bad_backward(x, constant, vec({NAN, NAN}));
  CHECK(anomaly_of([&] { sum(z).backward(); }) == "(no anomaly)");
  test::check_close(x.grad(), vec({2, 2}), 0, 0);
}

TEST_CASE("anomaly: nothing is checked when the mode is off", "[autograd][anomaly]") {
  CHECK_FALSE(autograd::is_anomaly_enabled());
  Tensor x = vec({0, -1, 4}).requires_grad_();
  Tensor y;
  CHECK(anomaly_of([&] { y = log(x); }) == "(no anomaly)");
  CHECK(std::isnan(y.cpu().data<float>()[1]));
  Tensor r = vec({0, 1}).requires_grad_();
  CHECK(anomaly_of([&] { sum(sqrt(r)).backward(); }) == "(no anomaly)");
  CHECK(std::isinf(r.grad().data<float>()[0]));
  // A node recorded with the mode off keeps no context; backward under the mode says so.
  Tensor s = vec({0, 1}).requires_grad_();
  Tensor loss = sum(sqrt(s));
  autograd::DetectAnomalyGuard anomaly;
  CHECK_THAT(anomaly_of([&] { loss.backward(); }), Contains("not recorded: anomaly mode was off in forward"));
}

TEST_CASE("anomaly: the guard restores the previous state (nesting, exceptions, other threads)", "[autograd][anomaly]") {
  CHECK_FALSE(autograd::is_anomaly_enabled());
  {
    autograd::DetectAnomalyGuard outer;
    CHECK(autograd::is_anomaly_enabled());
    {
      autograd::DetectAnomalyGuard off(false);
      CHECK_FALSE(autograd::is_anomaly_enabled());
      Tensor x = vec({-1}).requires_grad_();
      CHECK(anomaly_of([&] { (void)log(x); }) == "(no anomaly)");
    }
    CHECK(autograd::is_anomaly_enabled());
    bool other_thread_sees_it = true;  // the mode is per thread, like grad mode
    std::thread([&] { other_thread_sees_it = autograd::is_anomaly_enabled(); }).join();
    CHECK_FALSE(other_thread_sees_it);
  }
  CHECK_FALSE(autograd::is_anomaly_enabled());
  Tensor x = vec({-1}).requires_grad_();
  try {
    autograd::DetectAnomalyGuard anomaly;
    (void)log(x);
    FAIL("log(-1) under anomaly mode did not throw");
  } catch (const autograd::AnomalyError&) {
  }
  CHECK_FALSE(autograd::is_anomaly_enabled());  // the guard unwound with the exception
  autograd::set_detect_anomaly(true);
  CHECK(autograd::is_anomaly_enabled());
  autograd::set_detect_anomaly(false);
}

TEST_CASE("anomaly: forward and backward checks on the cuda device", "[autograd][anomaly][cuda]") {
  if (!cuda::is_available()) EMBER_SKIP("no cuda device in this build or process");
  autograd::DetectAnomalyGuard anomaly;
  Tensor x = vec({1, 2, -1, 4}, Device::cuda()).requires_grad_();
  CHECK_THAT(anomaly_of([&] { (void)log(x); }), Contains("forward of log produced NaN at element 2 of (4,)"));
  Tensor z = vec({4, 0, 1}, Device::cuda()).requires_grad_();
  Tensor loss = sum(sqrt(z));
  CHECK_THAT(anomaly_of([&] { loss.backward(); }), Contains("backward of sqrt returned Inf at element 1 of (3,)"));
  Tensor ok = vec({1, 2}, Device::cuda()).requires_grad_();
  CHECK(anomaly_of([&] { sum(exp(ok)).backward(); }) == "(no anomaly)");
}
