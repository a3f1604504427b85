package protocol

// Limits are the shape limits of seed §5.1.
type Limits struct {
	MaxContentBytes int
	MaxTags         int
	MaxTagBytes     int
	// MaxFuture and MaxAge bound created_at around now, in seconds. A zero
	// MaxAge disables the past bound (imports and mirrors of history).
	MaxFuture int64
	MaxAge    int64
}

// DefaultLimits are the seed's: 65536-byte content, 32 tags of 1024-byte
// elements, created_at within now+300 s and now-7 days.
func DefaultLimits() Limits {
	return Limits{MaxContentBytes: 65536, MaxTags: 32, MaxTagBytes: 1024, MaxFuture: 300, MaxAge: 7 * 86400}
}

// Check returns every limit e breaks at time now (unix seconds), in a fixed
// order; nil when e is within limits.
func (l Limits) Check(e *Event, now int64) []error {
	var errs []error
	if len(e.Content) > l.MaxContentBytes {
		errs = append(errs, Errorf(CodeContentTooLarge, "content exceeds %d bytes", l.MaxContentBytes))
	}
	if len(e.Tags) > l.MaxTags {
		errs = append(errs, Errorf(CodeTooManyTags, "too many tags (max %d)", l.MaxTags))
	}
tags:
	for i, t := range e.Tags {
		for j, v := range t {
			if len(v) > l.MaxTagBytes {
				errs = append(errs, Errorf(CodeTagTooLarge, "tag value exceeds %d bytes (tags[%d][%d])", l.MaxTagBytes, i, j))
				break tags
			}
		}
	}
	if e.CreatedAt > now+l.MaxFuture {
		errs = append(errs, Errorf(CodeTooFarFuture, "created_at too far in future (more than %d s ahead of the relay clock)", l.MaxFuture))
	}
	if l.MaxAge > 0 && e.CreatedAt < now-l.MaxAge {
		errs = append(errs, Errorf(CodeTooFarPast, "created_at too far in past (older than %d s)", l.MaxAge))
	}
	return errs
}
