// Tile lowers to one strided copy of twice the input's rank.
#ifndef TENSOROP_CORE_PLAN_TILE_H_
#define TENSOROP_CORE_PLAN_TILE_H_

#include "core/plan/plan.h"
#include "core/validate/tile.h"

namespace tensorop {

ExecutionPlan PlanTile(const TileGeometry& geometry);

}  // namespace tensorop

#endif  // TENSOROP_CORE_PLAN_TILE_H_
