#include "store/input_file.h"

// TODO(helper): implement.
