// bqmm: block-quantized weight matrix multiplication for LLM inference.
#pragma once

#include "bqmm/device.h"
#include "bqmm/fp8_matmul.h"
#include "bqmm/nbits_matmul.h"
#include "bqmm/status.h"
#include "bqmm/tensor.h"
