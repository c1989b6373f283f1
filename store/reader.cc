#include "store/reader.h"

// TODO(helper): implement.
