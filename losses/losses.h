// Every loss (users include ember.h).
#pragma once

#include "losses/arcface.h"
#include "losses/batch_hard_miner.h"
#include "losses/contrastive.h"
#include "losses/cross_entropy.h"
#include "losses/metric_common.h"
#include "losses/multi_similarity.h"
#include "losses/ntxent.h"
#include "losses/proxy_anchor.h"
#include "losses/reduction.h"
#include "losses/supcon.h"
#include "losses/triplet.h"
