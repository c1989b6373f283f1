// Early returns for absl::Status / absl::StatusOr, so that code which calls
// many fallible steps reads as the steps.
//   DMG_RETURN_IF_ERROR(expr);          returns expr's status if not ok
//   DMG_ASSIGN_OR_RETURN(lhs, expr);    lhs = *expr, or returns its status
#ifndef DMG_COMMON_STATUS_MACROS_H_
#define DMG_COMMON_STATUS_MACROS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define DMG_RETURN_IF_ERROR(expr)                                 \
  do {                                                            \
    if (::absl::Status dmg_status_ = (expr); !dmg_status_.ok()) { \
      return dmg_status_;                                         \
    }                                                             \
  } while (0)

#define DMG_STATUS_CONCAT_INNER(a, b) a##b
#define DMG_STATUS_CONCAT(a, b) DMG_STATUS_CONCAT_INNER(a, b)

#define DMG_ASSIGN_OR_RETURN(lhs, expr)                                      \
  DMG_ASSIGN_OR_RETURN_IMPL(DMG_STATUS_CONCAT(dmg_statusor_, __LINE__), lhs, \
                            expr)

#define DMG_ASSIGN_OR_RETURN_IMPL(statusor, lhs, expr) \
  auto statusor = (expr);                              \
  if (!statusor.ok()) return statusor.status();        \
  lhs = *std::move(statusor)

#endif  // DMG_COMMON_STATUS_MACROS_H_
