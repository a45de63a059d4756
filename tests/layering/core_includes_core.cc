// Must compile: the control for core_includes_runtime.cc, with the same include path, so that the
// failure there is the layering and not a broken probe.
#include "core/admission_core.h"
