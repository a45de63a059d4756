// fairgate/seconds.h: how fairgate writes a duration.
//
// Every duration in fairgate's options and calls is a Seconds: seconds held in a double, as the
// costs are. Any std::chrono duration converts to it implicitly (`std::chrono::milliseconds(50)`,
// `0.05s` with std::chrono_literals); a plain number does not, so a value in the wrong unit does
// not compile. Times of day (Unix seconds in the store, the scheduler's clock in events) stay
// plain doubles: they are instants, not durations.
//
// Thread safety: a plain value type.
#ifndef FAIRGATE_SECONDS_H_
#define FAIRGATE_SECONDS_H_

#include <chrono>

namespace fairgate {

using Seconds = std::chrono::duration<double>;

}  // namespace fairgate

#endif  // FAIRGATE_SECONDS_H_
