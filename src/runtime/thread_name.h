// NameThisThread: the name fairgate gives each thread it starts, as `top -H`, `ps -L`, gdb and perf
// show it. Internal to src/runtime.
//
// Every name starts with "fg-" and names the thread's role (fg-worker, fg-marker, fg-removals,
// fg-timer, ...), so that a server linking fairgate tells its threads from fairgate's, and a
// profile of a busy scheduler says which of them the time went to. Linux keeps at most 15
// characters of a name; each role's name fits.
//
// Thread safety: called by the thread being named, first thing in its body.
#ifndef FAIRGATE_RUNTIME_THREAD_NAME_H_
#define FAIRGATE_RUNTIME_THREAD_NAME_H_

namespace fairgate::internal {

// Names the calling thread `name` (at most 15 characters). A name the system refuses is left
// unset: the thread works the same without it.
void NameThisThread(const char* name);

}  // namespace fairgate::internal

#endif  // FAIRGATE_RUNTIME_THREAD_NAME_H_
