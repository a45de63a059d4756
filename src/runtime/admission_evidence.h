// ToEvidence: the evidence record (fairgate/evidence.h) of one admission of the core, what the
// scheduler hands its evidence sink and `fairgate sim --evidence` writes. Internal to fairgate:
// the core describes its decision (core::Admission) and knows nothing of evidence.
#ifndef FAIRGATE_RUNTIME_ADMISSION_EVIDENCE_H_
#define FAIRGATE_RUNTIME_ADMISSION_EVIDENCE_H_

#include "core/admission_core.h"
#include "fairgate/evidence.h"

namespace fairgate::internal {

// The evidence record of `admission`, decided at `now`.
AdmissionEvidence ToEvidence(const core::Admission& admission, double now);

}  // namespace fairgate::internal

#endif  // FAIRGATE_RUNTIME_ADMISSION_EVIDENCE_H_
