"""Day 83, deliberately wrong: day83_copy_on_write.py with one classic mistake.

MISTAKE: the copy is owed and a new page allocated, but the table keeps the old, shared page, so the token is written
         in place into a page other sequences still read.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day83_copy_on_write"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        ('            self.allocator.free(table[j])  # one owner fewer; the others keep the original\n'
         '            table[j] = new\n'),
        '            self.allocator.free(new)  # the new page is dropped again; the table keeps the shared one\n',
    ),
    (
        ('            refs[old] -= 1  # the last owner left writes in place: no copy for it\n'
         '            tables[s, j] = new\n'),
        '            refs[old] -= 1\n',
    ),
]
