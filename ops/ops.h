// Every op, for code inside ember (users include ember.h).
#pragma once

#include "autograd/graph.h"
#include "ops/activation.h"
#include "ops/creation.h"
#include "ops/conv.h"
#include "ops/elementwise.h"
#include "ops/index_ops.h"
#include "ops/linalg.h"
#include "ops/linear.h"
#include "ops/pool.h"
#include "ops/reduce.h"
#include "ops/shape_ops.h"
#include "ops/dropout.h"
#include "ops/norm.h"
#include "ops/pair_tiles.h"
#include "ops/softmax.h"
#include "ops/scale_add_relu.h"
