#include "sched/request_state.h"

namespace vosti {

const char* request_status_name(RequestStatus s) {
  switch (s) {
    case RequestStatus::kWaiting:
      return "waiting";
    case RequestStatus::kRunning:
      return "running";
    case RequestStatus::kPreempted:
      return "preempted";
    case RequestStatus::kFinished:
      return "finished";
  }
  return "unknown";
}

}  // namespace vosti
