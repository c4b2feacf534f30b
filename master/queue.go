package master

// lockList is an intrusive, circular, doubly linked list of locks. Only the
// head is stored (the tail is head.prev), which keeps a resource's three
// queues at one word each.
type lockList struct {
	head *lock
}

func (q *lockList) empty() bool { return q.head == nil }

func (q *lockList) front() *lock { return q.head }

func (q *lockList) back() *lock {
	if q.head == nil {
		return nil
	}
	return q.head.prev
}

// next returns the lock after l, or nil at the end of the list.
func (q *lockList) next(l *lock) *lock {
	if l.next == q.head {
		return nil
	}
	return l.next
}

// prevOf returns the lock before l, or nil at the front.
func (q *lockList) prevOf(l *lock) *lock {
	if l == q.head {
		return nil
	}
	return l.prev
}

func (q *lockList) pushBack(l *lock) {
	if q.head == nil {
		l.prev, l.next = l, l
		q.head = l
		return
	}
	tail := q.head.prev
	l.prev, l.next = tail, q.head
	tail.next = l
	q.head.prev = l
}

func (q *lockList) remove(l *lock) {
	if l.next == l {
		q.head = nil
	} else {
		l.prev.next = l.next
		l.next.prev = l.prev
		if q.head == l {
			q.head = l.next
		}
	}
	l.prev, l.next = nil, nil
}
