use std::sync::Arc;

use warp::http::StatusCode;
use warp::Filter;

use super::pipeline::Pipeline;
use super::ConversionApproved;

pub fn routes(
    pipeline: Arc<Pipeline>,
) -> impl Filter<Extract = (impl warp::Reply,), Error = warp::Rejection> + Clone {
    warp::path!("webhooks" / "conversions")
        .and(warp::post())
        .and(warp::body::json())
        .and(warp::any().map(move || pipeline.clone()))
        .and_then(on_conversion)
}

async fn on_conversion(
    ev: ConversionApproved,
    pipeline: Arc<Pipeline>,
) -> Result<impl warp::Reply, warp::Rejection> {
    let status = match pipeline.process(&ev).await {
        Ok(_) => StatusCode::OK,
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR,
    };
    Ok(warp::reply::with_status("", status))
}
