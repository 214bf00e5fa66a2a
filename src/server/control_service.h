// ControlService: the routes by which an RL trainer drives `vosti serve` (vLLM's and SGLang's
// names and bodies): weight updates, pause/resume, sleep/wake, and the deployment served.
//
// Routes (docs/ARCHITECTURE.md, "Weight sync, pause, sleep"):
//   POST /init_weight_transfer_engine {"init_info": {"backend": "http"}}
//   POST /start_weight_update {"is_checkpoint_format": true}
//   POST /update_weights {"update_info": {"names", "dtype_names", "shapes", "data_base64"}}  (chunked)
//   POST /finish_weight_update {}
//   POST /update_weights_from_disk {"model_path", "abort_all_requests"?, "flush_cache"?}  (SGLang)
//   POST /pause {"mode": "abort" | "wait" | "keep"} (or ?mode=), /pause_generation (SGLang's
//   modes: abort, in_place, retract); POST /resume, /continue_generation; GET /is_paused
//   POST /sleep?level=1|2, /release_memory_occupation (level 2); POST /wake_up,
//   /resume_memory_occupation; GET /is_sleeping
//   GET /deployment: the deployment id and what it is made of
// A weight update is staged by start/update (each chunk validated against the model: names,
// shapes, dtypes, byte counts; a bad chunk is refused as a whole and changes nothing) and
// swapped in by finish at a step boundary with nothing in flight (EngineLoop::run_when_idle):
// requests admitted before it finish on the old weights, requests sent meanwhile wait and run
// on the new ones. The prefix cache is dropped with the old weights; the version goes up by one;
// the deployment id follows the weights' values. The old weights keep serving after any error.
// Replies: JSON; errors in OpenAI's shape: 400 a bad body (named), 409 a call out of order
// (finish without start, update while asleep or with kept requests), 501 a transport Vosti does
// not have (CUDA IPC, NCCL), 500 an engine failure.
// Thread safety: handle() is called on many I/O threads at once; weight state is under mu_,
// and the swap itself runs on the engine thread.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "model/model_file.h"
#include "offline/weights_identity.h"
#include "server/engine_loop.h"
#include "server/http_server.h"

namespace vosti {

class ControlService {
 public:
  // `file` and `digester` are the weights `loop` serves (the digester has digested `file`);
  // `abort_all` aborts every generation request in flight (pause with mode abort).
  ControlService(EngineLoop& loop, std::shared_ptr<const ModelFile> file, WeightsDigester digester,
                 std::function<void()> abort_all);

  // The HTTP method of one of its routes, or null if `path` is not one.
  static const char* method_of(std::string_view path);
  using Reply = std::function<void(int status, std::string json)>;
  // Answers one request to a route of method_of(); `reply` runs once, maybe later, on any thread.
  void handle(const HttpRequest& request, Reply reply);

 private:
  void init_transfer(const HttpRequest& request, const Reply& reply);
  void start_update(const HttpRequest& request, const Reply& reply);
  void update_chunk(const HttpRequest& request, const Reply& reply);
  void finish_update(const Reply& reply);
  void update_from_disk(const HttpRequest& request, const Reply& reply);
  void pause(const HttpRequest& request, const Reply& reply, bool sglang);
  void sleep(int level, const Reply& reply);
  void wake_up(const Reply& reply);
  std::string deployment_json() const;
  // Swaps in `file` on the engine thread (see the header comment) and replies.
  void apply(std::shared_ptr<const ModelFile> file, bool sglang_reply, Reply reply);

  EngineLoop& loop_;
  std::function<void()> abort_all_;
  mutable std::mutex mu_;
  std::shared_ptr<const ModelFile> file_;    // guarded by mu_: the weights served
  int64_t version_ = 0;                      // guarded by mu_
  std::string backend_;                      // guarded by mu_: "" until init_weight_transfer_engine
  std::shared_ptr<const ModelFile> staged_;  // guarded by mu_: set from start to finish
  int64_t num_staged_ = 0;                   // guarded by mu_: tensors received since start
  WeightsDigester digester_;                 // engine thread only (inside ops)
};

}  // namespace vosti
