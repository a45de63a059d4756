#include "fairgate/version.h"

namespace fairgate {

std::string_view Version() { return FAIRGATE_VERSION_STRING; }

}  // namespace fairgate
