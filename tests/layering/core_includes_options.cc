// Must not compile: the core (fairgate::core) takes the rule's options (fairgate/rule_options.h),
// not the scheduler's, which name its observers, evidence sink and store. CTest's
// Build.TheCoreCannotIncludeTheSchedulerOptions builds this and expects the include to fail.
#include "fairgate/options.h"
