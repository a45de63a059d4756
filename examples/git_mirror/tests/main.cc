// The git mirror's tests: they spawn git processes, which may exit before reading all their input.
#define DOCTEST_CONFIG_IMPLEMENT
#include <signal.h>

#include "doctest/doctest.h"

int main(int argc, char** argv) {
  signal(SIGPIPE, SIG_IGN);
  return doctest::Context(argc, argv).run();
}
