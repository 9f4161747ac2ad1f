#include "common/gpu.h"
