//! expect: missing_idempotency_token
//!
//! Tenant onboarding API (async-graphql over axum). The admin console retries the
//! `provisionTenantStorage` mutation when the request times out; each call creates an EFS file
//! system for the tenant.

use async_graphql::{Context, Object, Result, SimpleObject};
use aws_sdk_efs::types::{PerformanceMode, Tag};
use aws_sdk_efs::Client as Efs;

#[derive(SimpleObject)]
pub struct TenantStorage {
    pub file_system_id: String,
    pub lifecycle_state: String,
}

pub struct OnboardingMutation;

#[Object]
impl OnboardingMutation {
    async fn provision_tenant_storage(
        &self,
        ctx: &Context<'_>,
        tenant_id: String,
        encrypted: bool,
    ) -> Result<TenantStorage> {
        let efs = ctx.data::<Efs>()?;
        let fs = efs
            .create_file_system()
            .performance_mode(PerformanceMode::GeneralPurpose)
            .encrypted(encrypted)
            .tags(Tag::builder().key("tenant").value(&tenant_id).build()?)
            .send()
            .await?;
        Ok(TenantStorage {
            file_system_id: fs.file_system_id().to_string(),
            lifecycle_state: fs.life_cycle_state().as_str().to_string(),
        })
    }
}
