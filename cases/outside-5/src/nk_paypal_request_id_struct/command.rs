use uuid::Uuid;

#[derive(Debug, Clone)]
pub struct CaptureCommand {
    pub order_id: String,
    pub request_id: Uuid,
}

impl CaptureCommand {
    pub fn for_order(order_id: String) -> Self {
        Self {
            order_id,
            request_id: Uuid::new_v4(),
        }
    }
}
