#include "engine/dist/agree_on_stop.h"

namespace engine {

bool AgreeOnStop(bool stop_here, Communicator& comm) {
  return comm.AllreduceMax(stop_here ? 1.0 : 0.0) > 0;
}

SumAndStop AllreduceSumAndStop(double x, bool stop_here, Communicator& comm) {
  double figures[2] = {x, stop_here ? 1.0 : 0.0};
  comm.Wait(comm.StartAllreduceSum(figures, 2));
  return SumAndStop{figures[0], figures[1] > 0};
}

}  // namespace engine
