#include "store/build_graph.h"

// TODO(helper): implement.
