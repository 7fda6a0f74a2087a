package rdma

// BatchPoster is a QueuePair that posts several work requests in one call,
// as verbs posts a chain (wr->next) in one ibv_post_send: the provider pays
// its per-call costs (entering the QP, state checks) once per batch. The
// requests run in slice order, exactly as the same PostSend calls would.
//
// PostSendBatch returns how many requests it posted. If err is not nil,
// wrs[n] was not posted — err is what PostSend would have returned for it —
// and neither was any request after it; the first n were, and complete (or
// not) as if posted one by one. It keeps nothing of wrs after it returns.
//
// Optional: use the PostSendBatch function, which falls back to PostSend.
type BatchPoster interface {
	PostSendBatch(wrs []WorkRequest) (int, error)
}

// PostSendBatch posts wrs through qp: in one call if qp is a BatchPoster,
// else one PostSend at a time. Results as BatchPoster.PostSendBatch.
func PostSendBatch(qp QueuePair, wrs []WorkRequest) (int, error) {
	if bp, ok := qp.(BatchPoster); ok {
		return bp.PostSendBatch(wrs)
	}
	return PostEach(qp, wrs)
}

// PostEach posts wrs one PostSend at a time: the fallback of PostSendBatch,
// for callers that resolved once that qp is not a BatchPoster.
func PostEach(qp QueuePair, wrs []WorkRequest) (int, error) {
	for i := range wrs {
		if err := qp.PostSend(&wrs[i]); err != nil {
			return i, err
		}
	}
	return len(wrs), nil
}
