//! An answer's body that holds its review's slot, and so its memory
//! charge, until hyper has taken the last byte of it: the answer is part
//! of what a review holds (issue 27, N1), and a client slow to read a
//! large answer keeps it alive.

use std::pin::Pin;
use std::task::{Context, Poll};

use axum::body::{Body, Bytes, HttpBody};
use http_body::{Frame, SizeHint};

use super::intake::ReviewSlot;

pub(crate) struct AnswerBody {
    inner: Body,
    /// Dropped with the body: when hyper has written the last frame, or
    /// the connection went away.
    _slot: ReviewSlot,
}

impl AnswerBody {
    /// `answer` as a body holding `slot`; its length stays known, so
    /// hyper still sends it with a Content-Length in one write.
    pub(crate) fn holding(slot: ReviewSlot, answer: Vec<u8>) -> Body {
        Body::new(AnswerBody {
            inner: Body::from(answer),
            _slot: slot,
        })
    }
}

impl HttpBody for AnswerBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
