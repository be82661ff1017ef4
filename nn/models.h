// Ready-made models; one include for all of nn/models/.
//
//   auto net = mlp({784, 256, 128, 10});       // nn/models/mnist.h: the MNIST models
//   auto big = se_resnext101_32x4d(1000);      // nn/models/resnet.h: the ResNet family
//   auto any = find_model("lenet5").build(10, nullptr);   // nn/models/zoo.h: by name
#pragma once

#include "nn/models/mnist.h"
#include "nn/models/resnet.h"
#include "nn/models/zoo.h"
