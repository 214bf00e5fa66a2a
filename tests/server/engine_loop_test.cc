// EngineLoop's gate: a control operation waits for the requests in flight and runs between
// steps with admission closed, requests sent meanwhile are held and run after it on the new
// deployment; pause (wait, keep), resume; a pinned deployment that differs and sleep are refused.
#include "server/engine_loop.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>

#include "runner/load_device_model.h"
#include "tests/test_paths.h"

namespace vosti {
namespace {

std::unique_ptr<EngineLoop> make_loop() {
  auto model = load_device_model(vosti::testing::source_dir() + "/tests/golden/models/qwen3-tiny", "cpu");
  EXPECT_TRUE(model.ok()) << model.status().to_string();
  EngineConfig c;
  c.num_blocks = 64;
  c.max_model_len = 256;
  c.num_threads = 1;
  auto engine = Engine::create(*model, c);
  EXPECT_TRUE(engine.ok()) << engine.status().to_string();
  auto d = std::make_shared<DeploymentInfo>();
  d->deployment_id = "first";
  return std::make_unique<EngineLoop>(std::move(engine).value(), d);
}

// One request's life as seen from outside: its admission and its final output.
struct Tracked {
  std::promise<Admission> admitted;
  std::promise<RequestOutput> finished;
  std::atomic<int> num_outputs{0};
  // When valid, the engine thread waits on it inside the first output's callback: the request is
  // mid-flight for as long as the test needs, whatever the machine's speed.
  std::shared_future<void> hold_first;
};

void submit(EngineLoop& loop, Tracked& t, int32_t max_tokens, std::string pin = "") {
  RequestSpec spec;
  spec.prompt = {5, 17, 99, 3};
  spec.max_tokens = max_tokens;
  spec.ignore_eos = true;
  EngineLoop::Submission s{std::move(spec), [&t](const RequestOutput& out) {
                             if (++t.num_outputs == 1 && t.hold_first.valid()) t.hold_first.wait();
                             if (out.finished) t.finished.set_value(out);
                           }};
  std::vector<EngineLoop::Submission> subs;
  subs.push_back(std::move(s));
  loop.submit(std::move(subs), std::move(pin), [&t](Admission a) { t.admitted.set_value(std::move(a)); });
}

template <typename T>
bool ready(const std::future<T>& f, int ms = 0) {
  return f.wait_for(std::chrono::milliseconds(ms)) == std::future_status::ready;
}

TEST(EngineLoop, OpWaitsForRequestsInFlightAndHoldsNewOnes) {
  auto loop = make_loop();
  Tracked first;
  submit(*loop, first, 40);
  auto first_admitted = first.admitted.get_future();
  ASSERT_TRUE(ready(first_admitted));
  EXPECT_EQ(first_admitted.get().deployment->deployment_id, "first");
  auto first_done = first.finished.get_future();

  std::promise<bool> op_saw_idle;
  loop->run_when_idle([&](Engine& engine) {
    op_saw_idle.set_value(!engine.has_work());
    auto d = std::make_shared<DeploymentInfo>();
    d->deployment_id = "second";
    loop->set_deployment(d);
  });
  Tracked second;
  submit(*loop, second, 2);
  auto second_admitted = second.admitted.get_future();
  auto op_done = op_saw_idle.get_future();
  ASSERT_TRUE(ready(op_done, 60000));
  EXPECT_TRUE(op_done.get());         // the op ran with nothing in flight...
  ASSERT_TRUE(ready(first_done, 0));  // ...after the first request finished
  EXPECT_EQ(first_done.get().num_output_tokens, 40);
  ASSERT_TRUE(ready(second_admitted, 60000));
  const Admission a = second_admitted.get();
  EXPECT_EQ(a.refusal, AdmissionRefusal::kNone);
  EXPECT_EQ(a.deployment->deployment_id, "second");  // held, then run on the new deployment
  EXPECT_TRUE(ready(second.finished.get_future(), 60000));
}

TEST(EngineLoop, PinnedDeploymentMustMatch) {
  auto loop = make_loop();
  Tracked wrong;
  submit(*loop, wrong, 2, "other");
  const Admission a = wrong.admitted.get_future().get();
  EXPECT_EQ(a.refusal, AdmissionRefusal::kDeploymentMismatch);
  EXPECT_NE(a.message.find("other"), std::string::npos) << a.message;
  EXPECT_NE(a.message.find("first"), std::string::npos) << a.message;
  Tracked right;
  submit(*loop, right, 2, "first");
  EXPECT_EQ(right.admitted.get_future().get().refusal, AdmissionRefusal::kNone);
  EXPECT_TRUE(ready(right.finished.get_future(), 60000));
}

TEST(EngineLoop, PauseKeepFreezesWaitDrainsAndResumeReleases) {
  auto loop = make_loop();
  Tracked kept;
  std::promise<void> release_first;
  kept.hold_first = release_first.get_future().share();
  submit(*loop, kept, 60);
  while (kept.num_outputs == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::promise<void> paused;
  loop->pause(PauseMode::kKeep, [&] { paused.set_value(); });  // frozen from now: the step ends, no other
  release_first.set_value();
  paused.get_future().wait();
  EXPECT_TRUE(loop->paused());
  const int frozen_at = kept.num_outputs;
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(kept.num_outputs, frozen_at);  // no step while kept
  // An op that needs the engine idle runs at the boundary and sees the kept request.
  std::promise<Status> op;
  loop->run_when_idle([&](Engine& engine) { op.set_value(engine.sleep(1)); });
  EXPECT_EQ(op.get_future().get().code(), StatusCode::kFailedPrecondition);
  Tracked held;
  submit(*loop, held, 2);
  auto held_admitted = held.admitted.get_future();
  EXPECT_FALSE(ready(held_admitted, 50));
  EXPECT_EQ(loop->num_held(), 1);
  // Switching to wait lets the kept request finish; then nothing is in flight.
  std::promise<void> drained;
  loop->pause(PauseMode::kWait, [&] { drained.set_value(); });
  drained.get_future().wait();
  auto kept_done = kept.finished.get_future();
  ASSERT_TRUE(ready(kept_done));
  EXPECT_EQ(kept_done.get().num_output_tokens, 60);
  EXPECT_FALSE(ready(held_admitted));
  EXPECT_TRUE(loop->resume());
  EXPECT_FALSE(loop->resume());
  ASSERT_TRUE(ready(held_admitted, 60000));
  EXPECT_EQ(held_admitted.get().refusal, AdmissionRefusal::kNone);
  EXPECT_TRUE(ready(held.finished.get_future(), 60000));
}

TEST(EngineLoop, AsleepRefusesAndWakeAdmits) {
  auto loop = make_loop();
  std::promise<Status> slept;
  loop->run_when_idle([&](Engine& engine) { slept.set_value(engine.sleep(2)); });
  ASSERT_TRUE(slept.get_future().get().ok());
  EXPECT_EQ(loop->sleep_level(), 2);
  // The snapshot follows the op: give the engine thread a moment.
  for (int i = 0; i < 1000 && loop->stats().runner.weight_bytes != 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(loop->stats().runner.weight_bytes, 0);
  Tracked refused;
  submit(*loop, refused, 2);
  const Admission a = refused.admitted.get_future().get();
  EXPECT_EQ(a.refusal, AdmissionRefusal::kAsleep);
  EXPECT_NE(a.message.find("wake_up"), std::string::npos) << a.message;
  std::promise<Status> woke;
  loop->run_when_idle([&](Engine& engine) {
    woke.set_value(engine.wake_up(
        [] { return load_device_model(vosti::testing::source_dir() + "/tests/golden/models/qwen3-tiny", "cpu"); }));
  });
  ASSERT_TRUE(woke.get_future().get().ok());
  Tracked after;
  submit(*loop, after, 2);
  EXPECT_EQ(after.admitted.get_future().get().refusal, AdmissionRefusal::kNone);
  EXPECT_TRUE(ready(after.finished.get_future(), 60000));
}

}  // namespace
}  // namespace vosti
