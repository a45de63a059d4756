// A map key made of a small interned index and a name: (job type, job id) for estimates,
// (conflict group, job id) for conflict resources. Hash and equality are transparent, so lookups
// take an IndexedNameView and build no string.
#ifndef FAIRGATE_CORE_INDEXED_NAME_H_
#define FAIRGATE_CORE_INDEXED_NAME_H_

#include <cstdint>
#include <string>
#include <utility>

#include "absl/hash/hash.h"
#include "absl/strings/string_view.h"

namespace fairgate::core {

struct IndexedNameView {
  std::uint32_t index;
  absl::string_view name;
};

struct IndexedName {
  std::uint32_t index;
  std::string name;

  IndexedNameView view() const { return {index, name}; }
};

struct IndexedNameHash {
  using is_transparent = void;
  std::size_t operator()(IndexedNameView v) const { return absl::HashOf(v.index, v.name); }
  std::size_t operator()(const IndexedName& v) const { return (*this)(v.view()); }
};

struct IndexedNameEq {
  using is_transparent = void;
  static IndexedNameView View(IndexedNameView v) { return v; }
  static IndexedNameView View(const IndexedName& v) { return v.view(); }
  template <typename A, typename B>
  bool operator()(const A& a, const B& b) const {
    const IndexedNameView x = View(a), y = View(b);
    return x.index == y.index && x.name == y.name;
  }
};

}  // namespace fairgate::core

#endif  // FAIRGATE_CORE_INDEXED_NAME_H_
