//! The release artefacts: the wheel, the portable binary, the container image and the
//! Kubernetes manifests (scripts/dist.sh and scripts/build-image.sh build them first). One
//! binary: the crate links once.

#[path = "../common/mod.rs"]
mod common;

mod dist_container;
mod dist_image;
mod dist_portable;
mod dist_wheel;
mod k8s_manifest;
