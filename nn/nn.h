// The nn layer in one include: modules, layers, models, initialisation, optimizers, LR
// schedules, gradient clipping, loss scaling and checkpoints.
#pragma once

#include "nn/checkpoint.h"
#include "nn/conv_bn.h"
#include "nn/conv_layers.h"
#include "nn/grad_scaler.h"
#include "nn/init.h"
#include "nn/layers.h"
#include "nn/models.h"
#include "nn/module.h"
#include "nn/norm_layers.h"
#include "nn/optim/adam.h"
#include "nn/optim/clip_grad.h"
#include "nn/optim/lr_scheduler.h"
#include "nn/optim/optimizer.h"
#include "nn/optim/sgd.h"
#include "nn/sequential.h"
#include "nn/state_dict.h"
