//! Payload variants in the matrix: [`add_variants`] puts, after each payload of a
//! [`MatrixSpec`], its variants under the chosen transforms ([`crate::lab::Transform`]),
//! keeping only those that fit whole into every task's target (a variant is longer than
//! its payload; one a model would see cut is left out, with the reason, rather than
//! measured).

use std::sync::Arc;

use super::matrix::{MatrixSpec, check_fits};
use crate::lab::{Transform, with_variants};
use crate::world::WorldData;

/// Adds the variants of every payload of `spec` under `transforms`, in catalog order
/// (each payload followed by its variants), checked against `world`. Returns why each
/// left-out variant was left out (it could not be read back, is too long for a payload,
/// or would be cut in some task's read).
pub fn add_variants(spec: &mut MatrixSpec, world: &WorldData, transforms: &[Transform]) -> Vec<String> {
    let (all, skipped) = with_variants(&spec.attacks, transforms);
    let mut notes: Vec<String> = skipped.iter().map(ToString::to_string).collect();
    let kept: Vec<_> = all
        .into_iter()
        .filter(|a| {
            if spec.attacks.iter().any(|o| o.id == a.id) {
                return true;
            }
            match spec.tasks.iter().find_map(|t| check_fits(world, t, a).err()) {
                None => true,
                Some(e) => {
                    notes.push(format!("{}: left out: {e}", a.id));
                    false
                }
            }
        })
        .collect();
    spec.attacks = Arc::from(kept);
    notes
}
