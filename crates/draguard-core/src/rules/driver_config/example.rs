//! The example driver, `gpu.example.com`: `gpu.resource.example.com/v1alpha1`
//! `GpuConfig`, mirrored from kubernetes-sigs/dra-example-driver at
//! 31914cea (2026-07-20): the types in
//! `api/example.com/resource/gpu/v1alpha1/{api,sharing}.go`, the messages
//! in its validate.go (strategy, interval :38, partition count :49) and
//! sharing.go (`GetTimeSlicingConfig`, `GetSpacePartitioningConfig`, which
//! the plugin calls at prepare: internal/profiles/gpu/gpu.go:346-352).
//! The kubelet plugin decodes strictly (cmd/dra-example-kubeletplugin/state.go:126).
//!
//! The plugin applies `Normalize` before `Validate` (gpu.go:324-329): a
//! config without `sharing` becomes TimeSlicing at the Default interval,
//! so it is valid, though the driver's webhook (which validates first)
//! refuses it.

use serde_json::{Value, json};

use super::BuiltIn;

pub const DRIVER: &str = "gpu.example.com";
pub const API_VERSION: &str = "gpu.resource.example.com/v1alpha1";

pub fn schemas() -> Vec<BuiltIn> {
    vec![(DRIVER, API_VERSION, "GpuConfig", gpu_config())]
}

fn gpu_config() -> Value {
    json!({
        "type": "object",
        "properties": {
            "sharing": {
                "type": "object",
                "properties": {
                    "strategy": {"type": "string"},
                    // `Interval` is `omitempty` and not defaulted inside an
                    // existing TimeSlicingConfig: a missing one is "" and refused.
                    "timeSlicingConfig": {
                        "type": "object",
                        "properties": {"interval": {"type": "string"}},
                        "x-kubernetes-validations": [{
                            "rule": "has(self.interval) && self.interval in ['Default', 'Short', 'Medium', 'Long']",
                            "fieldPath": ".interval",
                            "messageExpression": "'unknown time-slice interval: ' + (has(self.interval) ? self.interval : '')"
                        }]
                    },
                    "spacePartitioningConfig": {
                        "type": "object",
                        "properties": {
                            "partitionCount": {
                                "type": "integer",
                                "x-kubernetes-validations": [{
                                    "rule": "self >= 0",
                                    "messageExpression": "'invalid partition count: ' + string(self)"
                                }]
                            }
                        }
                    }
                },
                "x-kubernetes-validations": [
                    {
                        "rule": "has(self.strategy) && self.strategy in ['TimeSlicing', 'SpacePartitioning']",
                        "fieldPath": ".strategy",
                        "messageExpression": "'unknown GPU sharing strategy: ' + (has(self.strategy) ? self.strategy : '')"
                    },
                    {
                        "rule": "!has(self.strategy) || self.strategy != 'TimeSlicing' || !has(self.spacePartitioningConfig) || self.spacePartitioningConfig == null",
                        "fieldPath": ".spacePartitioningConfig",
                        "reason": "FieldValueForbidden",
                        "message": "cannot use SpacePartitioningConfig with the 'TimeSlicing' strategy"
                    },
                    {
                        "rule": "!has(self.strategy) || self.strategy != 'SpacePartitioning' || !has(self.timeSlicingConfig) || self.timeSlicingConfig == null",
                        "fieldPath": ".timeSlicingConfig",
                        "reason": "FieldValueForbidden",
                        "message": "cannot use TimeSlicingConfig with the 'SpacePartitioning' strategy"
                    }
                ]
            }
        }
    })
}
