#include "store/generator.h"

// TODO(helper): implement.
