#pragma once
// The recovery time of a gang restart (issue 34), pure: from the fault that
// restarted the gang to the first step after the resume, which node 0's
// trainer reports in the progress annotation's recovery section
// (contract/progress.h). Phases: launcher exit and gang restart (the fault to
// node 0's launcher start: pod deletion, creation, scheduling, container
// start), the trainer's start-up before the rendezvous, the rendezvous and
// process groups, the checkpoint load, other start-up, the first step.

#include <optional>
#include <string>

#include "contract/progress.h"
#include "operator/api/status.h"

namespace hypertrain::controller {

struct RecoveryMeasure {
  double seconds = 0;   // status.lastRecoverySeconds (milliseconds kept)
  std::string message;  // the Recovered event's: the total and each known phase
};

// The recovery of the current attempt, or nullopt unless: the gang restarted
// after a fault (restartAttempt > 0, lastFault set), `report` is of the
// current attempt (its "attempt" says so) and carries a recovery section,
// this attempt's recovery is not recorded yet (lastRecoveryAttempt), and the
// times parse with the first step after the fault. The fault's time is the
// failed container's finishedAt, else when the operator saw the fault.
std::optional<RecoveryMeasure> MeasureRecovery(const api::TrainingJobStatus& status,
                                               const contract::Progress& report);

}  // namespace hypertrain::controller
